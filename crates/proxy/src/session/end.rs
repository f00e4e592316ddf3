//! Why a session ended, and the line it logs.

/// Why a session ended.
#[derive(Debug)]
pub(super) enum End {
    ClientClosed,
    UpstreamClosed,
    ClientIo(std::io::Error),
    UpstreamIo(std::io::Error),
    /// The client asked for a protocol version the proxy does not speak (drivers probe for
    /// the highest version this way); it was answered and is closed.
    VersionRefused(String),
    /// The client sent bytes that are not the protocol; it was answered and is closed.
    BadClientInput(String),
    BadUpstreamInput(String),
    /// A writer went away (its socket failed).
    WriterGone,
    /// The drain's grace period ended.
    Closing,
}
