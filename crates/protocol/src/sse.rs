//! Bounding server-sent events (pure): an SSE parser keeps an event whole until the blank line
//! that ends it, so a reader of a hostile or broken stream must stop once one event grows past
//! a bound. Used for the gateway's upstreams and OpenCode's event stream.

/// Counts the bytes of the current server-sent event across chunks.
#[derive(Debug, Default)]
pub struct EventScan {
    event_bytes: usize,
    at_line_start: bool,
    after_cr: bool,
}

impl EventScan {
    /// Scans `bytes`; false once the current event is over `max` bytes.
    pub fn push(&mut self, bytes: &[u8], max: usize) -> bool {
        for &b in bytes {
            match b {
                // The `\n` of a `\r\n` line end.
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    if self.at_line_start {
                        self.event_bytes = 0;
                    }
                    self.at_line_start = true;
                    self.after_cr = b == b'\r';
                }
                _ => {
                    self.at_line_start = false;
                    self.after_cr = false;
                    self.event_bytes += 1;
                    if self.event_bytes > max {
                        return false;
                    }
                }
            }
        }
        true
    }
}
