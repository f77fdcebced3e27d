//! Splitting flow text into words: `key=value`, `key:value`, bare `key` and `key(...)`.
//!
//! Like `ovs-ofctl`, commas and white space both separate words at the top level, so the
//! dump-flows style `cookie=0x0, table=0, priority=10,ip actions=drop` parses too. Inside
//! parentheses nothing separates (`write_actions(output:1,output:2)` is one word). Action lists
//! are split on commas only ([`split_list`]).

use super::error::{ErrorKind, PResult, Problem};

/// One word of the text and where it starts (byte offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word<'a> {
    /// Byte offset of the word in the text.
    pub at: usize,
    /// The word.
    pub text: &'a str,
}

fn unbalanced(text: &str) -> Problem {
    Problem::new(
        ErrorKind::BadValue,
        text,
        format!("unbalanced parentheses in \"{text}\""),
        "close every \"(\" with a \")\"",
    )
}

/// Splits at top-level commas and white space; empty words are dropped.
pub(crate) fn split_words(text: &str) -> PResult<Vec<Word<'_>>> {
    split(text, |c| c == ',' || c.is_whitespace())
}

/// Splits an action (or bucket) list at top-level commas; words are trimmed, empty words
/// dropped.
pub(crate) fn split_list(text: &str) -> PResult<Vec<Word<'_>>> {
    split(text, |c| c == ',')
}

fn push<'a>(text: &'a str, from: usize, to: usize, words: &mut Vec<Word<'a>>) {
    let raw = &text[from..to];
    let trimmed = raw.trim_start();
    let at = from + (raw.len() - trimmed.len());
    let trimmed = trimmed.trim_end();
    if !trimmed.is_empty() {
        words.push(Word { at, text: trimmed });
    }
}

fn split(text: &str, is_sep: impl Fn(char) -> bool) -> PResult<Vec<Word<'_>>> {
    let mut words = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or_else(|| unbalanced(text))?,
            c if depth == 0 && is_sep(c) => {
                push(text, start, i, &mut words);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(unbalanced(text));
    }
    push(text, start, text.len(), &mut words);
    Ok(words)
}

/// Splits `key=value` at the first `=`.
pub(crate) fn split_eq(word: &str) -> (&str, Option<&str>) {
    match word.split_once('=') {
        Some((k, v)) => (k.trim(), Some(v.trim())),
        None => (word.trim(), None),
    }
}

/// Splits an action word: `name:arg`, `name(arg)` or `name`. The argument of `name(arg)` is
/// what is inside the parentheses; text after the closing parenthesis is an error.
pub(crate) fn split_action(word: &str) -> PResult<(&str, Option<&str>, bool)> {
    let colon = word.find(':');
    let paren = word.find('(');
    match (colon, paren) {
        (Some(c), None) => Ok((&word[..c], Some(&word[c + 1..]), false)),
        (Some(c), Some(p)) if c < p => Ok((&word[..c], Some(&word[c + 1..]), false)),
        (_, Some(p)) => {
            if !word.ends_with(')') {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    word,
                    format!("\"{word}\" has text after its closing parenthesis"),
                    "write name(arguments) with nothing after the \")\"",
                ));
            }
            Ok((&word[..p], Some(&word[p + 1..word.len() - 1]), true))
        }
        _ => Ok((word, None, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(ws: &[Word<'_>]) -> Vec<String> {
        ws.iter().map(|w| w.text.to_string()).collect()
    }

    #[test]
    fn words_split_at_commas_and_spaces_outside_parentheses() {
        let ws = split_words("cookie=0x0, table=0,  priority=1,ip actions=write_actions(a, b),c")
            .unwrap();
        assert_eq!(
            texts(&ws),
            [
                "cookie=0x0",
                "table=0",
                "priority=1",
                "ip",
                "actions=write_actions(a, b)",
                "c"
            ]
        );
        assert_eq!(ws[1].at, 12);
        assert!(split_words(" , ,").unwrap().is_empty());
    }

    #[test]
    fn lists_split_at_commas_only() {
        let ws = split_list(" output:1 , write_actions(output:2,output:3)").unwrap();
        assert_eq!(texts(&ws), ["output:1", "write_actions(output:2,output:3)"]);
    }

    #[test]
    fn unbalanced_parentheses_are_errors() {
        assert!(split_list("write_actions(output:1").is_err());
        assert!(split_list("output:1)").is_err());
    }

    #[test]
    fn action_words_split_at_colon_or_parenthesis() {
        assert_eq!(
            split_action("output:2").unwrap(),
            ("output", Some("2"), false)
        );
        assert_eq!(
            split_action("set_field:00:01:02:03:04:05->eth_src").unwrap(),
            ("set_field", Some("00:01:02:03:04:05->eth_src"), false)
        );
        assert_eq!(
            split_action("controller(max_len=12)").unwrap(),
            ("controller", Some("max_len=12"), true)
        );
        assert_eq!(split_action("drop").unwrap(), ("drop", None, false));
        assert!(split_action("write_actions(x)y").is_err());
        assert_eq!(split_eq("a=b=c"), ("a", Some("b=c")));
    }
}
