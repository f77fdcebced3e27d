//! Hayate fast path: poll-mode threads, exact-match cache, megaflow classifier, action execution.
#![deny(missing_docs)]
