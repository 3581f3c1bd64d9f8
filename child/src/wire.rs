//! The line protocol between a parent and its child, and the child's side of it.
//!
//! The child writes messages `@@ <key> <value>` on its stdout, one a line; anything before
//! `@@ ` on a line, and any line without it (libtest's own output, a vendor library
//! printing), is not part of the protocol. A value is made one line by [`escape`] (`\`
//! becomes `\\`, a newline `\n`), so any text travels. The parent writes plain lines on
//! the child's stdin, which the child reads with [`hear`].

use std::fmt::Display;
use std::io::{BufRead, Write};
use std::time::Duration;

/// Exit status of a child that [`start_watchdog`] ended.
pub const WATCHDOG_EXIT: i32 = 97;

/// Writes the message `@@ key value` to stdout (the child's side); `value` may hold
/// newlines.
pub fn say(key: &str, value: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {key} {}", escape(value));
    let _ = out.flush();
}

/// Reads one line from stdin (the child's side), without its line end; `None` at the end
/// of input (the parent closed the pipe), so an empty line is told from the end.
pub fn hear() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
    }
}

/// Starts a thread that ends this process (status [`WATCHDOG_EXIT`]) after `limit`,
/// writing `message` to stderr first: a child whose parent vanished without killing it,
/// or that hangs, does not live on.
pub fn start_watchdog(limit: Duration, message: String) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{message}");
        std::process::exit(WATCHDOG_EXIT);
    });
}

/// Runs a role's `body` (the child's side). On an error, tells the parent `@@ fail
/// <error>`, writes `<label>: <error>` to stderr and returns `false`; returns `true` when
/// the body succeeded. The caller picks the exit status.
pub fn run_role<E: Display>(label: &str, body: impl FnOnce() -> Result<(), E>) -> bool {
    match body() {
        Ok(()) => true,
        Err(e) => {
            let e = e.to_string();
            say("fail", &e);
            eprintln!("{label}: {e}");
            false
        }
    }
}

/// Makes a value one line: `\` becomes `\\`, a newline `\n`.
pub fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Inverse of [`escape`].
pub fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits `@@ key value` (possibly after other text on the line) into its parts, the
/// value unescaped; `None` for a line that holds no message.
pub fn parse_message(line: &str) -> Option<(String, String)> {
    let at = line.find("@@ ")?;
    let msg = &line[at + 3..];
    let (k, v) = msg.split_once(' ').unwrap_or((msg, ""));
    Some((k.to_owned(), unescape(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for s in ["plain", "two\nlines", "back\\slash\\n", "", "\\", "end\n"] {
            assert_eq!(unescape(&escape(s)), s);
            assert!(!escape(s).contains('\n'));
        }
    }

    #[test]
    fn messages_parse_after_noise() {
        assert_eq!(
            parse_message("test x ... @@ result pass fine"),
            Some(("result".into(), "pass fine".into()))
        );
        assert_eq!(
            parse_message("@@ ready"),
            Some(("ready".into(), String::new()))
        );
        assert_eq!(
            parse_message("@@ eof "),
            Some(("eof".into(), String::new()))
        );
        assert_eq!(
            parse_message("@@ err two\\nlines"),
            Some(("err".into(), "two\nlines".into()))
        );
        assert_eq!(parse_message("no marker"), None);
    }
}
