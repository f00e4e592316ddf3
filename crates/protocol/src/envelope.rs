//! Envelopes (issue 2).
