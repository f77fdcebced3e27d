//! Ring tests (filled below).
