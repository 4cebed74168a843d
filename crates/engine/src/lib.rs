//! Database readers (PostgreSQL today) and plumb's private PostgreSQL instance.
//!
//! A reader connects from a URL, reads named metric sets into flat counters and per-object
//! tables, and leaves formatting to the renderers. Passwords come from the URL or the
//! environment and are never printed: `redact` masks them in anything shown.

pub mod pg;
pub mod private;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Setup(String),
    #[error("{url}: {message}")]
    Connect { url: String, message: String },
    #[error("{what}: {message}")]
    Query { what: String, message: String },
    #[error("the database went away: {0}")]
    Gone(String),
    #[error("{0}")]
    Url(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The URL with any password replaced by `***`.
pub fn redact(url: &str) -> String {
    // scheme://user:password@host...
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((auth, host)) = rest.split_once('@') {
            if let Some((user, _)) = auth.split_once(':') {
                return format!("{scheme}://{user}:***@{host}");
            }
        }
    }
    let mut out = Vec::new();
    for part in url.split_whitespace() {
        if part.to_ascii_lowercase().starts_with("password=") {
            out.push("password=***".to_string());
        } else {
            out.push(part.to_string());
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_shown() {
        assert_eq!(
            super::redact("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(
            super::redact("host=db password=s3cret user=app"),
            "host=db password=*** user=app"
        );
        assert_eq!(super::redact("postgres://app@db/x"), "postgres://app@db/x");
    }
}
