//! [`DataError`]: what can be wrong with data, saying where.

use std::fmt;
use std::string::String;

/// Data that cannot be used, with the place it came from.
#[derive(Debug)]
pub enum DataError {
    /// Features and targets that do not make whole samples.
    Shape(String),
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataError::Shape(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for DataError {}
