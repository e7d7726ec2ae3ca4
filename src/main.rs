//! The `parkway` command line.

fn main() {
    println!("parkway {}", env!("CARGO_PKG_VERSION"));
}
