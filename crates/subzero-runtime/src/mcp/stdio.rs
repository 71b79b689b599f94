//! The host's end of the MCP channel: this process's stdin and stdout.
//!
//! Hosts connect a server's stdio to pipes (Python, Rust) or to Unix socket pairs (Node's
//! libuv). Those are read and written by the runtime's own reactor, non-blocking, so a
//! frame goes from the host to the server and back on the runtime's threads alone. Tokio's
//! `stdin()`/`stdout()` hand each read and write to a blocking-pool thread instead: two more
//! threads at start, and a wake-up of another thread for every frame (on a VM whose other
//! CPU sleeps, the largest part of the first reply's time). Anything else (a terminal, a
//! file, `/dev/null`) keeps Tokio's blocking streams: making a terminal non-blocking would
//! change it for the shell that shares it.
//!
//! The descriptors are duplicates of 0 and 1. The non-blocking flag belongs to the open file,
//! which a host hands to this process alone (it keeps the pipe's other end), so it is left set:
//! putting it back while a reader task may still read would block a runtime thread.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use rustix::fs::{FileType, fstat};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The host's input: a pipe or socket on the reactor, else Tokio's blocking stdin.
pub(super) enum Input {
    Pipe(tokio::net::unix::pipe::Receiver),
    Socket(tokio::net::UnixStream),
    Blocking(tokio::io::Stdin),
}

/// The host's output: a pipe or socket on the reactor, else Tokio's blocking stdout.
pub(super) enum Output {
    Pipe(tokio::net::unix::pipe::Sender),
    Socket(tokio::net::UnixStream),
    Blocking(tokio::io::Stdout),
}

/// The kind of open file behind a descriptor that matters here.
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind(fd: BorrowedFd<'_>) -> Kind {
    match fstat(fd) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Fifo => Kind::Pipe,
            FileType::Socket => Kind::Socket,
            _ => Kind::Other,
        },
        Err(_) => Kind::Other,
    }
}

/// A socket on the reactor (made non-blocking here; tokio's pipe constructors do that for a
/// pipe themselves).
fn unix_stream(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(std)
}

/// One standard descriptor as a stream: `pipe` or `socket` on the reactor for a pipe or a
/// socket, else (or when that fails) `blocking`.
fn stream<T>(
    fd: BorrowedFd<'_>,
    pipe: impl FnOnce(OwnedFd) -> std::io::Result<T>,
    socket: impl FnOnce(tokio::net::UnixStream) -> T,
    blocking: impl FnOnce() -> T,
) -> T {
    let found = kind(fd);
    if matches!(found, Kind::Other) {
        return blocking();
    }
    let on_reactor = fd.try_clone_to_owned().and_then(|dup| match found {
        Kind::Pipe => pipe(dup),
        _ => unix_stream(dup).map(socket),
    });
    on_reactor.unwrap_or_else(|e| {
        tracing::debug!(%e, "a standard descriptor stays a blocking stream");
        blocking()
    })
}

/// This process's stdin and stdout as the MCP channel. Must be called inside a Tokio
/// runtime (the reactor registers the descriptors).
pub(super) fn open() -> (Input, Output) {
    let input = stream(
        std::io::stdin().as_fd(),
        |fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map(Input::Pipe),
        Input::Socket,
        || Input::Blocking(tokio::io::stdin()),
    );
    let output = stream(
        std::io::stdout().as_fd(),
        |fd| tokio::net::unix::pipe::Sender::from_owned_fd(fd).map(Output::Pipe),
        Output::Socket,
        || Output::Blocking(tokio::io::stdout()),
    );
    (input, output)
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Input::Pipe(r) => Pin::new(r).poll_read(cx, buf),
            Input::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Input::Blocking(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_write(cx, buf),
            Output::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Output::Blocking(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_flush(cx),
            Output::Socket(s) => Pin::new(s).poll_flush(cx),
            Output::Blocking(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(w) => Pin::new(w).poll_shutdown(cx),
            Output::Socket(s) => Pin::new(s).poll_shutdown(cx),
            Output::Blocking(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
