//! Noticing the end of the host's stdin as it happens.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// An `AsyncRead` that runs a callback once, the first time its inner reader reports
/// end of file.
pub(super) struct WatchEof<R> {
    inner: R,
    on_eof: Option<Box<dyn FnOnce() + Send>>,
}

impl<R> WatchEof<R> {
    pub(super) fn new(inner: R, on_eof: impl FnOnce() + Send + 'static) -> Self {
        WatchEof {
            inner,
            on_eof: Some(Box::new(on_eof)),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for WatchEof<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && buf.filled().len() == before
            && buf.remaining() > 0
            && let Some(on_eof) = self.on_eof.take()
        {
            on_eof();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn the_callback_runs_once_at_end_of_file() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let mut reader = WatchEof::new(&b"hello"[..], move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let mut text = String::new();
        reader.read_to_string(&mut text).await.unwrap();
        let mut more = [0u8; 4];
        assert_eq!(reader.read(&mut more).await.unwrap(), 0);
        assert_eq!(text, "hello");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
