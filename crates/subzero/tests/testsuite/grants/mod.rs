//! Kernel-enforced filesystem grants (Landlock), privileged and unprivileged.

mod landlock;
mod landlock_unprivileged;
mod network;
