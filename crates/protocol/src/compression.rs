//! v4 compression (issue 2).
