//! Several sessions on one thread: a small executor over ppoll(2), as pgbench's threads serve
//! their connections (`-j`). A task waits on a socket or a time; when no task can go on, the
//! thread sleeps in one ppoll over all the sockets until the first one is ready or the first
//! time comes. No runtime, no waker registry: a leaf future names what it waits for in a
//! thread-local slot before it returns `Pending`, and the executor reads that slot.
//!
//! The same futures run outside the executor with [`block_on`], which waits for what the leaf
//! named (one ppoll or one sleep) and polls again.

use std::cell::Cell;
use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// What a pending task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// Poll it again at once.
    Now,
    /// A file descriptor ready for `events` (POLLIN, POLLOUT).
    Fd(RawFd, i16),
    /// A time.
    Until(Instant),
}

thread_local! {
    static WAITING: Cell<Option<Wait>> = const { Cell::new(None) };
}

/// Pending until `fd` is readable (or has an error or hang-up, which the next read reports).
pub fn readable(fd: RawFd) -> impl Future<Output = ()> {
    Leaf {
        wait: Wait::Fd(fd, libc::POLLIN),
        armed: false,
    }
}

/// Pending until `fd` can take more bytes.
pub fn writable(fd: RawFd) -> impl Future<Output = ()> {
    Leaf {
        wait: Wait::Fd(fd, libc::POLLOUT),
        armed: false,
    }
}

/// Pending until `t`.
pub fn sleep_until(t: Instant) -> impl Future<Output = ()> {
    Leaf {
        wait: Wait::Until(t),
        armed: false,
    }
}

struct Leaf {
    wait: Wait,
    armed: bool,
}

impl Future for Leaf {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if let Wait::Until(t) = self.wait {
            if Instant::now() >= t {
                return Poll::Ready(());
            }
        } else if self.armed {
            // Polled again: the executor saw the descriptor ready (the caller's next read or
            // write says how).
            return Poll::Ready(());
        }
        self.armed = true;
        WAITING.with(|w| w.set(Some(self.wait)));
        Poll::Pending
    }
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Result<F::Output, Wait> {
    WAITING.with(|w| w.set(None));
    let mut cx = Context::from_waker(Waker::noop());
    match f.poll(&mut cx) {
        Poll::Ready(v) => Ok(v),
        // A future that waits on something this executor does not know is polled again.
        Poll::Pending => Err(WAITING.with(|w| w.take()).unwrap_or(Wait::Now)),
    }
}

/// Run `f` to the end on this thread, waiting in ppoll or a sleep whenever it is pending.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    loop {
        match poll_once(f.as_mut()) {
            Ok(v) => return v,
            Err(Wait::Now) => {}
            Err(Wait::Fd(fd, ev)) => {
                let mut p = [libc::pollfd {
                    fd,
                    events: ev,
                    revents: 0,
                }];
                // SAFETY: one valid pollfd; no timeout.
                unsafe { libc::ppoll(p.as_mut_ptr(), 1, std::ptr::null(), std::ptr::null()) };
            }
            Err(Wait::Until(t)) => std::thread::sleep(t.saturating_duration_since(Instant::now())),
        }
    }
}

/// Run every task on this thread until all have ended; their outputs in the tasks' order.
pub fn run_all<'a, T>(tasks: Vec<Pin<Box<dyn Future<Output = T> + 'a>>>) -> Vec<T> {
    let mut slots: Vec<(Pin<Box<dyn Future<Output = T> + 'a>>, Option<Wait>)> =
        tasks.into_iter().map(|t| (t, Some(Wait::Now))).collect();
    let mut out: Vec<Option<T>> = slots.iter().map(|_| None).collect();
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(slots.len());
    let mut who: Vec<usize> = Vec::with_capacity(slots.len());
    loop {
        let now = Instant::now();
        let mut ran = false;
        for (i, (f, wait)) in slots.iter_mut().enumerate() {
            let go = match *wait {
                Some(Wait::Now) => true,
                Some(Wait::Until(t)) => now >= t,
                _ => false,
            };
            if go {
                ran = true;
                match poll_once(f.as_mut()) {
                    Ok(v) => {
                        out[i] = Some(v);
                        *wait = None;
                    }
                    Err(w) => *wait = Some(w),
                }
            }
        }
        if slots.iter().all(|(_, w)| w.is_none()) {
            break;
        }
        if ran && slots.iter().any(|(_, w)| *w == Some(Wait::Now)) {
            continue;
        }
        // Nothing can go on: sleep until a socket is ready or the first time comes.
        fds.clear();
        who.clear();
        let mut first: Option<Instant> = None;
        for (i, (_, w)) in slots.iter().enumerate() {
            match *w {
                Some(Wait::Fd(fd, ev)) => {
                    fds.push(libc::pollfd {
                        fd,
                        events: ev,
                        revents: 0,
                    });
                    who.push(i);
                }
                Some(Wait::Until(t)) => first = Some(first.map_or(t, |f| f.min(t))),
                _ => {}
            }
        }
        let ts = first.map(|t| {
            let d = t.saturating_duration_since(Instant::now());
            libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            }
        });
        let tp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: `fds` holds fds.len() valid pollfds; `tp` is null or points at `ts`.
        let n = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                tp,
                std::ptr::null(),
            )
        };
        if n > 0 {
            for (p, &i) in fds.iter().zip(&who) {
                if p.revents != 0 {
                    slots[i].1 = Some(Wait::Now);
                }
            }
        }
    }
    out.into_iter()
        .map(|v| v.expect("every task ended"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    /// Read exactly `n` bytes from a non-blocking socket, waiting in the executor.
    async fn read_n(s: &mut UnixStream, n: usize) -> Vec<u8> {
        let mut got = Vec::new();
        let mut b = [0u8; 64];
        while got.len() < n {
            match s.read(&mut b) {
                Ok(0) => break,
                Ok(k) => got.extend_from_slice(&b[..k]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    readable(s.as_raw_fd()).await
                }
                Err(e) => panic!("{e}"),
            }
        }
        got
    }

    #[test]
    fn tasks_on_one_thread_each_wait_for_their_own_socket() {
        // Two sessions; the peer answers the second first: each task ends when its own reply
        // comes, neither holds up the other.
        let (mut a, mut pa) = UnixStream::pair().unwrap();
        let (mut b, mut pb) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let peer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            pb.write_all(b"bbbb").unwrap();
            std::thread::sleep(Duration::from_millis(30));
            pa.write_all(b"aaaa").unwrap();
        });
        let order = std::cell::RefCell::new(Vec::new());
        let t0 = Instant::now();
        let tasks: Vec<Pin<Box<dyn Future<Output = Vec<u8>> + '_>>> = vec![
            Box::pin(async {
                let v = read_n(&mut a, 4).await;
                order.borrow_mut().push('a');
                v
            }),
            Box::pin(async {
                let v = read_n(&mut b, 4).await;
                order.borrow_mut().push('b');
                v
            }),
        ];
        let out = run_all(tasks);
        peer.join().unwrap();
        assert_eq!(out, vec![b"aaaa".to_vec(), b"bbbb".to_vec()]);
        assert_eq!(*order.borrow(), vec!['b', 'a']);
        assert!(t0.elapsed() >= Duration::from_millis(55));
    }

    #[test]
    fn timers_and_sockets_wake_the_thread_in_time() {
        let t0 = Instant::now();
        let tasks: Vec<Pin<Box<dyn Future<Output = Duration>>>> = vec![
            Box::pin(async move {
                sleep_until(t0 + Duration::from_millis(40)).await;
                t0.elapsed()
            }),
            Box::pin(async move {
                sleep_until(t0 + Duration::from_millis(10)).await;
                t0.elapsed()
            }),
        ];
        let out = run_all(tasks);
        assert!(out[0] >= Duration::from_millis(40) && out[0] < Duration::from_millis(400));
        assert!(out[1] >= Duration::from_millis(10) && out[1] < out[0]);
        // block_on waits the same way, outside any executor.
        let (mut a, mut pa) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let w = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            pa.write_all(b"xy").unwrap();
        });
        assert_eq!(block_on(read_n(&mut a, 2)), b"xy");
        w.join().unwrap();
    }
}
