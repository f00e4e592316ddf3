//! Lazy views over message bodies (spec section 4) and encoders for the requests the proxy
//! builds itself. Views borrow the body; nothing is copied until a caller asks for it.
//!
//! One module per opcode, named after the spec; [`body`] handles the flag-driven prefix
//! (tracing id, warnings, custom payload) that precedes a body.

pub mod batch;
pub mod body;
pub mod error;
pub mod event;
pub mod execute;
pub mod prepare;
pub mod query;
pub mod result;
pub mod rows_edit;
pub mod startup;
pub mod supported;

pub use body::{RequestBody, ResponseBody};
pub use error::ErrorView;
pub use query::{QueryParams, QueryRequest, QueryView};
pub use result::ResultView;
