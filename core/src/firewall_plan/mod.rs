//! The firewall's planning: the PVE calls that turn a live rule list into
//! the desired one (`list`), a keyed list's (`keyed`), the guard against a
//! cluster firewall that would lock its operators out (`lockout`), the
//! calls as a plan carries them and the lines a list is compared by
//! (`calls`), and the actions of each firewall object and guest firewall
//! (`plan`).

pub mod calls;
pub mod keyed;
pub mod list;
pub mod lockout;
pub(crate) mod plan;

pub use calls::{Listed, lines};
pub use plan::{guest_firewall, read_scope};
