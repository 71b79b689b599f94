//! Configuration files as the broker reads them: broken entries, template ids.

mod broken_entries;
mod template_ids;
