//! Isolated checkouts end to end: real git repositories, real brokers and workers, real
//! Landlock, and a model that answers each child from the plan its prompt carries.

pub(crate) mod support;

mod faults;
mod hostile;
mod parallel;
mod refusals;
mod setup;
