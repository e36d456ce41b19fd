//! Writing to stdout when it may be a pipe that closes early.

use std::io::{ErrorKind, Write as _};

/// Writes `args` (and a newline) to stdout. A closed pipe ends the program
/// with success, as it ends `kubectl get ... | head`: the reader has what
/// it wanted. Any other failure to write ends it with a message.
pub(crate) fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| {
            if newline {
                out.write_all(b"\n")
            } else {
                Ok(())
            }
        })
        .and_then(|()| out.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("kubectl kplug: cannot write to stdout: {e}");
            std::process::exit(1);
        }
    }
}
