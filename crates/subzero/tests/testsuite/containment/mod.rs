//! Process containment of tool trees on every path: PID namespace, cgroup, subreaper fallback;
//! ownership of the locks, resources, signals, the view a tool has.

mod cgroup;
mod ownership;
mod pidns;
mod resources;
mod signals;
mod view;
