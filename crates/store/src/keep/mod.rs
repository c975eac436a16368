//! Keeping a recording: [`retention`] deletes whole old files under a budget (and
//! [`deleted`] records which, when and why; [`hold`] copies out first what holds keep),
//! [`alert`] keeps the alerts read from Suricata's EVE output ([`eve`]) with their holds,
//! [`recover`]
//! makes whole what a killed writer left, and [`lock`] lets one live writer hold a name.
pub mod alert;
pub mod deleted;
pub mod eve;
pub mod hold;
pub mod lock;
pub mod recover;
pub mod retention;
