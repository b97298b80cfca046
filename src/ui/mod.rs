//! The UI layer: renders loop events, asks questions.
