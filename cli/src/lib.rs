//! The `parkway` command line's library: the load engine behind `parkway load` and the
//! crash harness behind `parkway crash`, here so their behaviour tests can reach them.
//! The command line itself is `src/bin/parkway`; the simulation it runs (`parkway sim`)
//! is the `parkway` crate's own [`parkway::sim`].

#![warn(missing_docs, unreachable_pub)]

pub mod cluster;
pub mod crash;
pub mod load;
pub mod replay;
