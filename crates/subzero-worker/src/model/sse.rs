//! A Server-Sent Events parser, fed chunk by chunk, after the WHATWG "interpreting an event
//! stream" rules: a line ends at CRLF, LF or a lone CR (also when a CRLF is split across two
//! chunks); one leading UTF-8 BOM is skipped; `data` lines are joined with LF per event, and a
//! `data` line without a colon is an empty one; one space after the colon is dropped; `event`,
//! `id`, `retry`, other fields and `:` comments are ignored; an event is dispatched at a blank
//! line. One leniency: [`SseParser::finish`] also dispatches a last event (and line) that the
//! stream did not terminate, where a browser would drop it.
//!
//! What a caller may rely on: the events do not depend on where the stream was split; every
//! fed byte is searched for a line end once (the held partial line holds no line end, so it
//! is never searched again); memory is bounded by the cap given to
//! [`SseParser::with_max_line`]: a line or one event's data longer than it is an [`SseError`].

use super::{ModelError, StreamBounds};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A line or an event that passed the parser's cap. After one, the parser answers every
/// further `feed` and `finish` with the same error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("a stream line passed {max} bytes without a line end")]
    LineTooLong { max: usize },
    #[error("a stream event's data passed {max} bytes without a blank line to end it")]
    EventTooLarge { max: usize },
}

impl From<SseError> for ModelError {
    fn from(error: SseError) -> Self {
        ModelError::Stream(error.to_string())
    }
}

#[derive(Debug)]
pub struct SseParser {
    /// The bytes of a line that has not ended yet; never holds a CR or LF.
    held: Vec<u8>,
    /// The data buffer of the spec: each `data` value followed by an LF.
    data: String,
    /// The last line ended at a CR, so an LF that comes next (maybe in the next chunk) ends
    /// nothing.
    after_cr: bool,
    /// No line has ended yet: the one that does may start with the BOM.
    at_start: bool,
    max: usize,
    failed: Option<SseError>,
    /// Bytes searched for a line end, over the parser's life: the linearity guarantee.
    searched: u64,
}

impl Default for SseParser {
    /// Capped at [`StreamBounds::DEFAULT`]'s `max_response_bytes`.
    fn default() -> Self {
        Self::with_max_line(
            usize::try_from(StreamBounds::DEFAULT.max_response_bytes).unwrap_or(usize::MAX),
        )
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that refuses a line, or one event's accumulated data, longer than `max`
    /// bytes, so it never holds much more than `max` bytes of the stream.
    pub fn with_max_line(max: usize) -> Self {
        Self {
            held: Vec::new(),
            data: String::new(),
            after_cr: false,
            at_start: true,
            max,
            failed: None,
            searched: 0,
        }
    }

    /// Feeds bytes; returns the data payloads of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        self.guard(|parser| parser.lines(bytes, &mut events))?;
        Ok(events)
    }

    /// Ends the stream; returns a last event that was not terminated by a blank line.
    pub fn finish(&mut self) -> Result<Vec<String>, SseError> {
        let mut events = Vec::new();
        self.guard(|parser| {
            if !parser.held.is_empty() {
                let held = std::mem::take(&mut parser.held);
                parser.line(&held, &mut events)?;
            }
            parser.dispatch(&mut events);
            Ok(())
        })?;
        Ok(events)
    }

    /// Runs `step` unless an earlier step failed; a failure is kept and the buffers freed.
    fn guard(
        &mut self,
        step: impl FnOnce(&mut Self) -> Result<(), SseError>,
    ) -> Result<(), SseError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        step(self).inspect_err(|&error| {
            self.failed = Some(error);
            self.held = Vec::new();
            self.data = String::new();
        })
    }

    fn lines(&mut self, mut rest: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        loop {
            if self.after_cr
                && let Some((&first, tail)) = rest.split_first()
            {
                self.after_cr = false;
                if first == b'\n' {
                    rest = tail;
                }
            }
            let Some(end) = self.line_end(rest) else {
                return self.hold(rest);
            };
            self.after_cr = rest[end] == b'\r';
            let (body, tail) = (&rest[..end], &rest[end + 1..]);
            rest = tail;
            if self.held.is_empty() {
                self.within_cap(body.len())?;
                self.line(body, events)?;
            } else {
                self.within_cap(self.held.len() + body.len())?;
                let mut line = std::mem::take(&mut self.held);
                line.extend_from_slice(body);
                self.line(&line, events)?;
                line.clear();
                self.held = line;
            }
        }
    }

    /// The offset of the first CR or LF in `bytes`; counts the bytes it looked at.
    fn line_end(&mut self, bytes: &[u8]) -> Option<usize> {
        let end = bytes.iter().position(|&b| b == b'\n' || b == b'\r');
        let looked = end.map_or(bytes.len(), |end| end + 1);
        self.searched += u64::try_from(looked).unwrap_or(u64::MAX);
        end
    }

    /// Keeps the start of a line that has not ended, within the cap.
    fn hold(&mut self, partial: &[u8]) -> Result<(), SseError> {
        self.within_cap(self.held.len() + partial.len())?;
        self.held.extend_from_slice(partial);
        Ok(())
    }

    fn within_cap(&self, line_bytes: usize) -> Result<(), SseError> {
        if line_bytes > self.max {
            return Err(SseError::LineTooLong { max: self.max });
        }
        Ok(())
    }

    /// One whole line, without its line end.
    fn line(&mut self, line: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        let line = if std::mem::take(&mut self.at_start) {
            line.strip_prefix(BOM).unwrap_or(line)
        } else {
            line
        };
        let (name, value) = match line.iter().position(|&b| b == b':') {
            None if line.is_empty() => {
                self.dispatch(events);
                return Ok(());
            }
            Some(0) => return Ok(()),
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if name == b"data" {
            let value = String::from_utf8_lossy(value);
            if self.data.len() + value.len() + 1 > self.max {
                return Err(SseError::EventTooLarge { max: self.max });
            }
            self.data.push_str(&value);
            self.data.push('\n');
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<String>) {
        if self.data.is_empty() {
            return;
        }
        self.data.pop();
        events.push(std::mem::take(&mut self.data));
    }
}

#[cfg(test)]
mod tests {
    use super::{SseError, SseParser};

    /// Feeds `chunks` in order, then finishes; every payload, in order.
    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(p.feed(chunk).expect("within the cap"));
        }
        out.extend(p.finish().expect("within the cap"));
        out
    }

    #[test]
    fn a_lone_cr_ends_a_line_and_two_end_an_event() {
        assert_eq!(events(&[b"data: a\r\rdata: b\r\r"]), vec!["a", "b"]);
        let mut p = SseParser::new();
        assert_eq!(p.feed(b"data: a\r\r"), Ok(vec!["a".to_owned()]));
    }

    #[test]
    fn a_crlf_split_across_two_feeds_is_one_line_end() {
        let mut p = SseParser::new();
        assert_eq!(p.feed(b"data: a\r"), Ok(vec![]));
        assert_eq!(
            p.feed(b"\ndata: b\r"),
            Ok(vec![]),
            "the LF after a CR ended an event"
        );
        assert_eq!(p.feed(b""), Ok(vec![]));
        assert_eq!(p.feed(b"\n"), Ok(vec![]));
        assert_eq!(p.feed(b"\r\n"), Ok(vec!["a\nb".to_owned()]));
    }

    #[test]
    fn a_leading_bom_is_skipped_even_when_split() {
        assert_eq!(events(&["\u{feff}data: a\n\n".as_bytes()]), vec!["a"]);
        assert_eq!(events(&[b"\xef", b"\xbb", b"\xbfdata: a\n\n"]), vec!["a"]);
        assert_eq!(
            events(&["\n\u{feff}data: a\n\n".as_bytes()]),
            Vec::<String>::new(),
            "only the stream's first bytes may be a BOM"
        );
    }

    #[test]
    fn data_without_a_colon_is_an_empty_data_line() {
        assert_eq!(events(&[b"data\n\ndata\ndata\n\n"]), vec!["", "\n"]);
        assert_eq!(events(&[b"data\ndata: x\n\n"]), vec!["\nx"]);
    }

    #[test]
    fn other_fields_comments_and_one_space_after_the_colon() {
        let stream = b": hi\nevent: e\nid: 7\nretry: 10\ndata:  two\ndata:none\n\n";
        assert_eq!(events(&[stream]), vec![" two\nnone"]);
    }

    #[test]
    fn many_events_in_one_feed_all_come_out() {
        let stream = "data: x\n\n".repeat(10_000);
        let mut p = SseParser::new();
        let out = p.feed(stream.as_bytes()).expect("within the cap");
        assert_eq!(out.len(), 10_000);
        assert!(out.iter().all(|data| data == "x"));
        assert_eq!(p.searched, stream.len() as u64);
    }

    #[test]
    fn events_split_across_feeds_and_crlf() {
        let mut p = SseParser::new();
        assert_eq!(p.feed(b"data: {\"a\""), Ok(vec![]));
        assert_eq!(
            p.feed(b":1}\r\n\r\n: comment\n\ndata: x\n"),
            Ok(vec!["{\"a\":1}".to_owned()])
        );
        assert_eq!(p.finish(), Ok(vec!["x".to_owned()]));
    }

    /// A 10 MB line fed in 1-byte and in 64 KiB pieces: each byte is searched for a line end
    /// exactly once (the held part is never searched again), so the work is linear.
    #[test]
    fn a_long_line_fed_in_small_pieces_is_searched_once() {
        const LEN: usize = 10_000_000;
        let stream: Vec<u8> = [b"data: ".as_slice(), &vec![b'x'; LEN], b"\n\n"].concat();
        for piece in [1, 64 * 1024] {
            let mut p = SseParser::with_max_line(16 * 1024 * 1024);
            let mut out = Vec::new();
            for chunk in stream.chunks(piece) {
                out.extend(p.feed(chunk).expect("within the cap"));
            }
            assert_eq!(p.searched, stream.len() as u64, "pieces of {piece}");
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].len(), LEN);
        }
    }

    #[test]
    fn a_line_over_the_cap_is_an_error_not_growth() {
        let mut p = SseParser::with_max_line(16);
        assert_eq!(p.feed(b"data: 0123456789"), Ok(vec![]));
        assert_eq!(
            p.feed(b"a"),
            Err(SseError::LineTooLong { max: 16 }),
            "17 bytes held"
        );
        assert!(p.held.capacity() == 0 && p.data.capacity() == 0);
        assert_eq!(p.feed(b"\n\n"), Err(SseError::LineTooLong { max: 16 }));
        assert_eq!(p.finish(), Err(SseError::LineTooLong { max: 16 }));

        let mut p = SseParser::with_max_line(16);
        assert_eq!(
            p.feed(b"data: 0123456789a\n"),
            Err(SseError::LineTooLong { max: 16 }),
            "a whole line in one chunk"
        );
        let mut p = SseParser::with_max_line(16);
        assert_eq!(
            p.feed(b"data: 0123456789\n\n"),
            Ok(vec!["0123456789".to_owned()])
        );
    }

    #[test]
    fn an_event_over_the_cap_is_an_error_even_in_short_lines() {
        let mut p = SseParser::with_max_line(8);
        assert_eq!(p.feed(b"data\n".repeat(8).as_slice()), Ok(vec![]));
        assert_eq!(p.feed(b"data\n"), Err(SseError::EventTooLarge { max: 8 }));
    }

    #[test]
    fn an_unterminated_last_line_and_event_come_out_at_finish() {
        assert_eq!(events(&[b"data: a\n\ndata: b\ndata: c"]), vec!["a", "b\nc"]);
        assert_eq!(events(&[b"data: a\r"]), vec!["a"]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        assert_eq!(events(&[b"data: \xff\xfe\n\n"]), vec!["\u{fffd}\u{fffd}"]);
    }
}
