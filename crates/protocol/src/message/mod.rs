//! Message views (issue 2).
