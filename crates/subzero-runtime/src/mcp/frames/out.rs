//! One writer owns stdout, so the MCP server's frames and the framing layer's error answers
//! never interleave: the server's bytes are written line by line, and an error answer goes
//! out only at a line boundary.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::window::Window;

/// What the MCP server writes: handed to the stdout task as it comes.
pub(crate) struct ServerOut {
    tx: mpsc::UnboundedSender<Vec<u8>>,
}

impl AsyncWrite for ServerOut {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.tx.send(buf.to_vec()) {
            Ok(()) => Poll::Ready(Ok(buf.len())),
            Err(_) => Poll::Ready(Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The two ways into stdout and the task that writes it; the task ends when both senders
/// are gone and everything was written.
pub(super) fn stdout_writer<W: AsyncWrite + Unpin + Send + 'static>(
    out: W,
    window: Arc<Window>,
) -> (
    ServerOut,
    mpsc::UnboundedSender<Vec<u8>>,
    tokio::task::JoinHandle<()>,
) {
    let (server_tx, server_rx) = mpsc::unbounded_channel();
    let (answer_tx, answer_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(write_lines(out, server_rx, answer_rx, window));
    (ServerOut { tx: server_tx }, answer_tx, task)
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut out: W,
    mut server: mpsc::UnboundedReceiver<Vec<u8>>,
    mut answers: mpsc::UnboundedReceiver<Vec<u8>>,
    window: Arc<Window>,
) {
    let mut partial: Vec<u8> = Vec::new();
    let mut waiting: VecDeque<Vec<u8>> = VecDeque::new();
    let (mut server_open, mut answers_open) = (true, true);
    while server_open || answers_open {
        tokio::select! {
            bytes = server.recv(), if server_open => match bytes {
                Some(bytes) => {
                    partial.extend_from_slice(&bytes);
                    if let Some(last) = partial.iter().rposition(|b| *b == b'\n') {
                        let rest = partial.split_off(last + 1);
                        let lines = std::mem::replace(&mut partial, rest);
                        if out.write_all(&lines).await.is_err() {
                            return;
                        }
                        // Each answer written gives its request's place back.
                        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                            window.written(line);
                        }
                    }
                }
                None => server_open = false,
            },
            line = answers.recv(), if answers_open => match line {
                Some(line) => waiting.push_back(line),
                None => answers_open = false,
            },
        }
        if partial.is_empty() {
            while let Some(line) = waiting.pop_front() {
                if out.write_all(&line).await.is_err() {
                    return;
                }
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    // The server is gone: what it left unterminated, then any answers still waiting.
    let _ = out.write_all(&partial).await;
    for line in waiting {
        let _ = out.write_all(&line).await;
    }
    let _ = out.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_waits_for_the_servers_line_to_end() {
        let (reader, writer) = tokio::io::duplex(1 << 16);
        let (mut server, answers, task) = stdout_writer(writer, Arc::new(Window::new()));
        server.write_all(b"{\"server\":").await.unwrap();
        // Let the writer take the half line first: the answer then has to wait for its end.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        answers.send(b"{\"answer\":1}\n".to_vec()).unwrap();
        tokio::task::yield_now().await;
        server.write_all(b"1}\n").await.unwrap();
        drop(server);
        drop(answers);
        task.await.unwrap();
        let mut text = String::new();
        let mut reader = reader;
        tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut text)
            .await
            .unwrap();
        assert_eq!(text, "{\"server\":1}\n{\"answer\":1}\n");
    }
}
