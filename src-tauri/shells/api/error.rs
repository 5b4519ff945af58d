//! The API's one error: what went wrong, as `{code, message}` on every transport (the UI branches on `code`).

use serde::Serialize;

use crate::features::replay::ReplayError;

/// Errors at the API boundary, serialised as `{code, message}`; the UI branches on `code`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// The world changed under the request (a replay's selection since its preview).
    #[error("{0}")]
    Conflict(String),
    /// The operator said no in the confirmation dialog.
    #[error("cancelled: nothing was changed")]
    Cancelled,
    #[error("{0}")]
    Unauthorized(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The JSON body of every API error: `{code, message}`.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
pub struct ErrorBody {
    #[ts(type = "'not_found' | 'bad_request' | 'conflict' | 'cancelled' | 'unauthorized' | 'internal'")]
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) => "not_found",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Conflict(_) => "conflict",
            ApiError::Cancelled => "cancelled",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        tracing::error!(error = %format!("{e:#}"), "api error");
        ApiError::Internal(format!("{e:#}"))
    }
}

impl From<ReplayError> for ApiError {
    fn from(e: ReplayError) -> Self {
        match e {
            ReplayError::EmptySelection | ReplayError::NothingEligible => ApiError::BadRequest(e.to_string()),
            ReplayError::SelectionChanged { .. } => ApiError::Conflict(e.to_string()),
            ReplayError::Invalid(m) => ApiError::BadRequest(m),
            ReplayError::NotFound(_) => ApiError::NotFound(e.to_string()),
            ReplayError::Storage(e) => e.into(),
        }
    }
}

impl Serialize for ApiError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ApiError", 2)?;
        st.serialize_field("code", self.code())?;
        st.serialize_field("message", &self.to_string())?;
        st.end()
    }
}
