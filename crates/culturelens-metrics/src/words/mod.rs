//! The caption analysis of the SoS paper (§6.1, App. G): image descriptions → unique terms per
//! image ([`segment`]) → Fighting Words per (model, language) document ([`fighting_words`]) →
//! the share of a culture's stereotype terms among a document's significant terms
//! ([`fighting_words::coverage`], SoS Fig. 6).

pub mod fighting_words;
#[cfg(feature = "segment")]
pub mod segment;
