//! The `parkway` command line's library: the load engine behind `parkway load`, here so
//! its behaviour tests can reach it. The command line itself is `src/bin/parkway`; the
//! simulation it runs (`parkway sim`) is the `parkway` crate's own [`parkway::sim`].

#![warn(missing_docs, unreachable_pub)]

pub mod load;
