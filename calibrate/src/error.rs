//! The importers' error: which file, which line, what was expected there.

use std::fmt;

/// A log that could not be read: names the file, the 1-based line (when there is one) and what
/// was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ImportError {
    pub file: String,
    /// 1-based line number; `None` for whole-file problems (unreadable, empty, bad gzip).
    pub line: Option<usize>,
    pub expected: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: expected {}", self.file, l, self.expected),
            None => write!(f, "{}: expected {}", self.file, self.expected),
        }
    }
}

impl ImportError {
    pub fn at(file: &str, line: usize, expected: impl Into<String>) -> Self {
        ImportError {
            file: file.to_string(),
            line: Some(line),
            expected: expected.into(),
        }
    }
    pub fn whole(file: &str, expected: impl Into<String>) -> Self {
        ImportError {
            file: file.to_string(),
            line: None,
            expected: expected.into(),
        }
    }
}

/// Reads a file as text, transparently gunzipping `.gz` files or files that start with the gzip
/// magic bytes.
pub fn read_text(path: &std::path::Path) -> Result<String, ImportError> {
    use std::io::Read as _;
    let file = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| ImportError::whole(&file, format!("a readable file ({e})")))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .map_err(|e| {
                ImportError::whole(&file, format!("a complete gzip stream of UTF-8 text ({e})"))
            })?;
        Ok(s)
    } else {
        String::from_utf8(bytes).map_err(|e| ImportError::whole(&file, format!("UTF-8 text ({e})")))
    }
}
