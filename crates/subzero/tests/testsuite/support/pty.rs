//! A program in a real pseudo-terminal, and the screen it draws, as a person would see it.
//!
//! The program gets a fresh pty as its stdin, stdout, stderr and controlling terminal (its
//! own session, as a terminal emulator starts a shell), at a fixed size. Everything it
//! writes goes through a VT100 emulator (`vt100`), so the test reads the rendered screen —
//! cell by cell, with colours — not the escape sequences. The bytes themselves are kept
//! too ([`Terminal::bytes`]), for tests of what the program lets reach the terminal.
// `setsid` and `TIOCSCTTY` run between fork and exec: two raw syscalls, nothing else; and
// `TIOCSWINSZ` sizes a new terminal.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running program and its screen.
pub struct Terminal {
    master: File,
    parser: Arc<Mutex<vt100::Parser>>,
    transcript: Arc<Mutex<Vec<u8>>>,
    child: Child,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Terminal {
    /// Start `command` in a `cols`×`rows` pseudo-terminal.
    pub fn spawn(mut command: Command, cols: u16, rows: u16) -> Terminal {
        let (master, slave) = open_pty(cols, rows);
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup the pty"));
        command
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: between fork and exec only async-signal-safe syscalls run: `setsid` makes
        // the child a session leader without a terminal, and `TIOCSCTTY` on its stdin (the
        // pty) makes the pty its controlling terminal, as in a terminal emulator.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("the program starts in the pty");
        drop(slave);
        let master = File::from(master);
        let nonzero = |n: u16| std::num::NonZeroU16::new(n).expect("a non-empty screen");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            nonzero(rows),
            nonzero(cols),
            0,
        )));
        let mut source = master.try_clone().expect("dup the pty master");
        let sink = Arc::clone(&parser);
        let transcript = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&transcript);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // EIO once the program and every holder of the slave are gone.
            while let Ok(n) = source.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().expect("screen").process(&buf[..n]);
                record
                    .lock()
                    .expect("transcript")
                    .extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            master,
            parser,
            transcript,
            child,
            reader: Some(reader),
        }
    }

    /// The screen's text, one line per row (trailing blanks trimmed).
    pub fn text(&self) -> String {
        let parser = self.parser.lock().expect("screen");
        let screen = parser.screen();
        let (rows, cols) = screen.size();
        screen
            .rows(0, cols.get())
            .take(usize::from(rows.get()))
            .map(|row| row.trim_end().to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Wait until the screen satisfies `ready` (bounded by `limit`); returns its text.
    /// Panics with the last screen when it never does.
    pub fn wait_for(&self, what: &str, limit: Duration, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let text = self.text();
            if ready(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what} within {limit:?}; it shows:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the screen contains `needle`.
    pub fn wait_text(&self, needle: &str, limit: Duration) -> String {
        self.wait_for(&format!("{needle:?}"), limit, |t| t.contains(needle))
    }

    /// Type `keys` (bytes as a terminal sends them: `"\r"` is Enter, `"\x1b[B"` Down).
    pub fn send(&mut self, keys: &str) {
        self.master
            .write_all(keys.as_bytes())
            .expect("write to the pty");
        self.master.flush().expect("flush the pty");
    }

    /// Every foreground colour used on the screen (other than the default).
    pub fn colours(&self) -> Vec<vt100::Color> {
        let parser = self.parser.lock().expect("screen");
        let screen = parser.screen();
        let (rows, cols) = screen.size();
        let mut found = Vec::new();
        for row in 0..rows.get() {
            for col in 0..cols.get() {
                if let Some(cell) = screen.cell(row, col)
                    && cell.fgcolor() != vt100::Color::Default
                    && !found.contains(&cell.fgcolor())
                {
                    found.push(cell.fgcolor());
                }
            }
        }
        found
    }

    /// The foreground colour of the first cell of `needle` on the screen.
    pub fn colour_of(&self, needle: &str) -> Option<vt100::Color> {
        let parser = self.parser.lock().expect("screen");
        let screen = parser.screen();
        let (_, cols) = screen.size();
        for (row, line) in screen.rows(0, cols.get()).enumerate() {
            if let Some(at) = line.find(needle) {
                let col = line[..at].chars().count() as u16;
                return screen.cell(row as u16, col).map(vt100::Cell::fgcolor);
            }
        }
        None
    }

    /// Whether the cell at the start of `needle` is shown in reverse video.
    pub fn inverse_at(&self, needle: &str) -> bool {
        let parser = self.parser.lock().expect("screen");
        let screen = parser.screen();
        let (_, cols) = screen.size();
        for (row, line) in screen.rows(0, cols.get()).enumerate() {
            if let Some(at) = line.find(needle) {
                let col = line[..at].chars().count() as u16;
                return screen
                    .cell(row as u16, col)
                    .is_some_and(vt100::Cell::inverse);
            }
        }
        false
    }

    /// Wait (bounded) for the program to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the program did not exit within {limit:?}; the screen shows:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait (bounded) for the program to exit and for everything it wrote to be read, so
    /// [`Terminal::bytes`] is all of it.
    pub fn finish(&mut self, limit: Duration) -> ExitStatus {
        let status = self.wait_exit(limit);
        if let Some(reader) = self.reader.take() {
            // The reader ends at EIO once the program is gone.
            let _ = reader.join();
        }
        status
    }

    /// Every byte the program wrote to the terminal so far, escape sequences included. The
    /// pty's line discipline writes each `\n` as `\r\n`.
    pub fn bytes(&self) -> Vec<u8> {
        self.transcript.lock().expect("transcript").clone()
    }
}

/// A new pseudo-terminal of `cols`×`rows`: its master and its slave, both close-on-exec from
/// the moment they are opened. The tests share one process, and `openpty(3)` opens both ends
/// inheritable: a process another test started meanwhile would keep this terminal open (its
/// program would never see the hang-up, its reader never the end).
fn open_pty(cols: u16, rows: u16) -> (OwnedFd, OwnedFd) {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
        .expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname");
    // std opens every file close-on-exec.
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&name)
        .unwrap_or_else(|e| panic!("open {name}: {e}"));
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize`, which lives across the call.
    let set = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    assert_eq!(set, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
    (OwnedFd::from(master), OwnedFd::from(slave))
}

/// What in `bytes` (as a program wrote them to a terminal) would make the terminal do
/// something other than show text: BEL, OSC and every other non-CSI escape, the C1 controls,
/// the bidi controls, a CR that does not end a line (newline and tab are text), and each CSI sequence (given without
/// its `ESC [`, as `32m` or `2J`) that `allowed` refuses. Each finding is named, with its
/// offset, for the failure message.
pub fn controls_beyond(bytes: &[u8], allowed: impl Fn(&str) -> bool) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\x1b' if chars.peek().is_some_and(|(_, n)| *n == '[') => {
                chars.next();
                let mut csi = String::new();
                for (_, n) in chars.by_ref() {
                    csi.push(n);
                    if ('\x40'..='\x7e').contains(&n) {
                        break;
                    }
                }
                if !allowed(&csi) {
                    found.push(format!("CSI {csi:?} at {at}"));
                }
            }
            '\x1b' => found.push(format!(
                "ESC {:?} at {at}",
                chars.peek().map(|(_, n)| *n).unwrap_or(' ')
            )),
            '\r' if chars.peek().is_some_and(|(_, n)| *n == '\n') => {}
            '\n' | '\t' => {}
            c if c.is_control()
                || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                found.push(format!("{c:?} at {at}"));
            }
            _ => {}
        }
    }
    found
}

/// The CSI sequences of a plain colour view (`ls`, `show`, `logs`, `doctor`): reset, bold,
/// dim, red, green, yellow.
pub fn colours_only(csi: &str) -> bool {
    matches!(csi, "0m" | "1m" | "2m" | "31m" | "32m" | "33m")
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(reader) = self.reader.take() {
            // The reader ends at EIO once the child is gone.
            let _ = reader.join();
        }
    }
}
