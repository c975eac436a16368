//! Stages: threads on other cores that run the apps on packets the capture workers steer
//! to them (pipeline mode, paper 003).

pub mod flows;
pub mod member;
pub mod pipe;
pub mod reorder;
