//! The one error type of the flow syntax: which text, which word, what was wrong, and what
//! would have been accepted.

use std::fmt;

/// What kind of text was being parsed (it names the text in error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextKind {
    /// An `add-flow` / `mod-flows` / `del-flows` line.
    Flow,
    /// An `add-group` line.
    Group,
    /// An `add-meter` line.
    Meter,
}

impl TextKind {
    fn noun(self) -> &'static str {
        match self {
            TextKind::Flow => "flow",
            TextKind::Group => "group",
            TextKind::Meter => "meter",
        }
    }
}

/// The class of a parse error, for callers that react to some of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A match or flow field name that is not known.
    UnknownField,
    /// An action or instruction name that is not known.
    UnknownAction,
    /// The same field, flag or instruction was given twice.
    Duplicate,
    /// Two fields (or a field and a protocol shorthand) set the same bits differently.
    Conflict,
    /// A number does not fit the field.
    OutOfRange,
    /// A value is not in the field's syntax (number, MAC, IPv4, IPv6, port, keyword).
    BadValue,
    /// A field was given a mask but cannot be masked.
    MaskNotAllowed,
    /// A field needs a protocol that the match does not select (e.g. `tp_dst` without `tcp`).
    Prerequisite,
    /// `actions=` is missing (add, modify) or present where it is not allowed (delete).
    Actions,
    /// Something is missing or given where it does not belong (e.g. a cookie mask on an add).
    Misplaced,
}

/// A flow, group or meter text that could not be parsed.
///
/// Displays as `flow "in_port=1,actions=outptu:2": unknown action "outptu"; expected one of
/// output, drop, normal, ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowParseError {
    /// What was being parsed.
    pub what: TextKind,
    /// The whole text.
    pub text: String,
    /// The offending word (a field, action, value or the empty string).
    pub word: String,
    /// The class of the error.
    pub kind: ErrorKind,
    /// What is wrong, in words (`unknown action "outptu"`).
    pub problem: String,
    /// What would have been accepted, or how to fix it (may be empty).
    pub expected: String,
    /// The line (from 1) when the text came from a file of flows.
    pub line: Option<usize>,
}

impl fmt::Display for FlowParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        write!(
            f,
            "{} \"{}\": {}",
            self.what.noun(),
            self.text,
            self.problem
        )?;
        if !self.expected.is_empty() {
            write!(f, "; {}", self.expected)?;
        }
        Ok(())
    }
}

impl std::error::Error for FlowParseError {}

/// An error before it knows the whole text (the parsers' internal error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub word: String,
    pub kind: ErrorKind,
    pub problem: String,
    pub expected: String,
}

impl Problem {
    /// A problem about `word`; `expected` is appended after "; " in the message.
    pub fn new(
        kind: ErrorKind,
        word: &str,
        problem: impl Into<String>,
        expected: impl Into<String>,
    ) -> Problem {
        Problem {
            word: word.to_string(),
            kind,
            problem: problem.into(),
            expected: expected.into(),
        }
    }

    /// Attaches the whole text.
    pub fn into_error(self, what: TextKind, text: &str) -> FlowParseError {
        FlowParseError {
            what,
            text: text.to_string(),
            word: self.word,
            kind: self.kind,
            problem: self.problem,
            expected: self.expected,
            line: None,
        }
    }
}

/// Result of the internal parsers.
pub(crate) type PResult<T> = Result<T, Problem>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_text_problem_and_expectation() {
        let e = Problem::new(
            ErrorKind::UnknownAction,
            "outptu",
            "unknown action \"outptu\"",
            "expected one of output, drop",
        )
        .into_error(TextKind::Flow, "in_port=1,actions=outptu:2");
        assert_eq!(
            e.to_string(),
            "flow \"in_port=1,actions=outptu:2\": unknown action \"outptu\"; \
             expected one of output, drop"
        );
        let e = Problem::new(ErrorKind::Actions, "", "missing actions=", "")
            .into_error(TextKind::Group, "x");
        assert_eq!(e.to_string(), "group \"x\": missing actions=");
    }
}
