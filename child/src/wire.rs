//! The line protocol between a parent and its child, and the child's side of it.
//!
//! The child writes messages `@@ <key> <value>` on its stdout, one a line. Only a line
//! that starts with `@@ ` is a message: any other line (libtest's own output, a vendor
//! library printing, even one that holds `@@ fail x` after other text) is not part of the
//! protocol. [`say`] starts each message on a fresh line (it writes a newline first), so
//! output left without a line end before it (libtest's `test name ... `) does not hide it;
//! the empty lines this leaves are ignored. A key is one word (no whitespace, not empty);
//! a value is made one line by [`escape`] (`\` becomes `\\`, a newline `\n`, a carriage
//! return `\r`), so any text travels. A message line longer than
//! [`MAX_LINE`](crate::MAX_LINE) bytes is refused by the parent. The parent writes plain
//! lines on the child's stdin, which the child reads with [`hear`].

use std::fmt::Display;
use std::io::{BufRead, Write};
use std::time::Duration;

/// Exit status of a child that [`start_watchdog`] ended.
pub const WATCHDOG_EXIT: i32 = 97;

/// Writes the message `@@ key value` to stdout (the child's side), on a line of its own;
/// `value` may hold any text (newlines included).
///
/// # Panics
/// When `key` is not a valid key ([`valid_key`]: empty, or holding whitespace or a
/// control character): keys are words written in the program, and one that the parent
/// would read as another key (or not at all) is a bug in the caller.
pub fn say(key: &str, value: &str) {
    assert!(
        valid_key(key),
        "devipc_child::say: invalid message key {key:?} (a key is one word: not empty, no \
         whitespace or control characters)"
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n@@ {key} {}", escape(value));
    let _ = out.flush();
}

/// Whether `key` can be a message key: not empty, without whitespace or control
/// characters (the parent splits a message at its first space, lines at `\n`).
pub fn valid_key(key: &str) -> bool {
    !key.is_empty() && !key.chars().any(|c| c.is_whitespace() || c.is_control())
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

/// Makes a value one line: `\` becomes `\\`, a newline `\n`, a carriage return `\r`.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// Inverse of [`escape`].
pub fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits a line `@@ key value` (without its line end) into its parts, the value
/// unescaped; `None` for a line that is not a message: one that does not start with `@@ `
/// (a `@@ ` after other text is not one), or whose key is empty.
pub fn parse_message(line: &str) -> Option<(String, String)> {
    let msg = line.strip_prefix("@@ ")?;
    let (k, v) = msg.split_once(' ').unwrap_or((msg, ""));
    if k.is_empty() {
        return None;
    }
    Some((k.to_owned(), unescape(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips() {
        for s in [
            "plain",
            "two\nlines",
            "back\\slash\\n",
            "",
            "\\",
            "end\n",
            "abc\r",
            "crlf\r\nline",
            "\\r literal",
        ] {
            assert_eq!(unescape(&escape(s)), s);
            assert!(!escape(s).contains(['\n', '\r']), "{s:?}");
        }
    }

    #[test]
    fn only_lines_starting_with_the_prefix_are_messages() {
        assert_eq!(
            parse_message("@@ result pass fine"),
            Some(("result".into(), "pass fine".into()))
        );
        // A vendor library's line that holds the marker after other text is noise.
        assert_eq!(parse_message("test x ... @@ result pass fine"), None);
        assert_eq!(parse_message("hipInit: @@ fail x"), None);
        assert_eq!(parse_message(" @@ fail x"), None);
        assert_eq!(parse_message("@@  empty key"), None);
        assert_eq!(parse_message(""), None);
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

    #[test]
    fn keys_are_one_word() {
        for good in ["ready", "bg-1", "a.b", "fail", "@@"] {
            assert!(valid_key(good), "{good:?}");
        }
        for bad in [
            "",
            "k with space",
            "tab\there",
            "new\nline",
            "cr\r",
            "nul\0",
        ] {
            assert!(!valid_key(bad), "{bad:?}");
        }
    }

    #[test]
    #[should_panic(expected = "invalid message key")]
    fn say_refuses_a_key_with_a_space() {
        say("k with space", "v");
    }

    #[test]
    #[should_panic(expected = "invalid message key")]
    fn say_refuses_an_empty_key() {
        say("", "v");
    }
}
