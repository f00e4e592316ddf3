//! Why a session ended, and the answers to client input that is not the protocol.

use crate::protocol_error;
use crate::writer::{Out, Outbox};
use autoprep_protocol::envelope::{EnvelopeDecoder, EnvelopeError, ProtocolVersion};
use autoprep_protocol::segment::SegmentError;

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
    /// The home connection's outbox is gone (its socket failed, or the home was replaced):
    /// what was pushed toward it is answered by its end (see `super::rehome`).
    HomeGone,
    /// The drain's grace period ended.
    Closing,
}

impl End {
    /// The home node's connection failed (not the client, not a protocol error): the client
    /// connection may move to a new home (see `super::rehome`).
    pub(super) fn home_failed(&self) -> bool {
        matches!(
            self,
            End::UpstreamClosed | End::UpstreamIo(_) | End::HomeGone
        )
    }
}

/// The client stopped sending in the middle of a frame: answer (it may still be reading).
pub(super) async fn refuse_truncated(
    buf: &[u8],
    envelopes: &EnvelopeDecoder,
    to_client: &Outbox,
) -> End {
    let (version, stream) = match envelopes.peek_header(buf) {
        Ok(Some(h)) => (h.version, h.stream.0),
        _ => (ProtocolVersion::V4, 0),
    };
    let msg = format!(
        "truncated frame: the connection ended after {} bytes of an incomplete frame",
        buf.len()
    );
    let _ = to_client
        .send(Out::Envelope(protocol_error::build(version, stream, &msg)))
        .await;
    End::BadClientInput(msg)
}

/// Answers malformed client input with a protocol ERROR; the session then ends.
pub(super) async fn refuse(err: SegmentError, to_client: &Outbox) -> End {
    let frame = match &err {
        SegmentError::Envelope(e) => protocol_error::for_envelope_error(e),
        other => protocol_error::build(ProtocolVersion::V5, 0, &other.to_string()),
    };
    let _ = to_client.send(Out::Envelope(frame)).await;
    match err {
        SegmentError::Envelope(EnvelopeError::UnsupportedVersion { .. }) => {
            End::VersionRefused(err.to_string())
        }
        _ => End::BadClientInput(err.to_string()),
    }
}
