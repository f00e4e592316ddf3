//! autoprep-cache: the prepared-statement cache shared by every client connection.
#![forbid(unsafe_code)]
