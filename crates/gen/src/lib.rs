//! Hayate traffic generator and analyzer. Not built yet.
