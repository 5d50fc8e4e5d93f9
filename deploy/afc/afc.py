#!/usr/bin/env python3
"""Pause/resume Xoff egress queues through a switch's shared-memory AFC ring (layout: README)."""
import fcntl, mmap, os, sys, time

class Afc:
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)
        self.m = mmap.mmap(self.fd, 0)
        # Every store must be one 4-byte store: struct.pack_into zero-fills before it packs, so
        # the switch could see a tail of 0. A memoryview item assignment is a single store.
        self.w, self.q = memoryview(self.m).cast('I'), memoryview(self.m)[:64].cast('Q')
        magic, ver, self.lanes, self.cap = self.w[0:4]
        if (magic, ver) != (0x43464158, 1):
            raise ValueError(f'{path}: not an AFC ring')
        for self.lane in range(self.lanes):  # own a lane: write lock on byte `lane`
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, self.lane); break
            except OSError:
                pass
        else:
            raise RuntimeError(f'{path}: every lane is taken')
        self.base = (64 + self.lane * (128 + 4 * self.cap)) // 4  # in u32 words
        try:  # the doorbell FIFO a sleeping switch waits on (an older switch has none)
            self.bell = os.open(path + '.bell', os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            self.bell = None

    def push(self, word):
        """Write one 32-bit AFC word; False (and the lane's `full` count +1) if the lane is full."""
        w, b = self.w, self.base
        tail = w[b]
        if (tail - w[b + 16]) % 2**32 >= self.cap:  # head at byte +64
            w[b + 1] = (w[b + 1] + 1) % 2**32
            return False
        w[b + 32 + tail % self.cap] = word  # slots at byte +128
        w[b] = (tail + 1) % 2**32  # publish: x86 keeps the two stores in order
        if self.q[5] and self.bell is not None:  # byte 40: the switch sleeps, ring its bell
            try:
                os.write(self.bell, b'\1')
            except BlockingIOError:
                pass  # a full FIFO already holds a wake-up
        return True

    def pause(self, port, queue, credit=0):
        return self.push(1 << 31 | port << 22 | queue << 15 | credit)

    def resume(self, port, queue):
        return self.push(port << 22 | queue << 15)

    def counters(self):
        """(applied, refused) by the switch, and words refused by full lanes."""
        full = sum(self.w[(68 + i * (128 + 4 * self.cap)) // 4] for i in range(self.lanes))
        return self.q[2], self.q[3], full

def main(a):
    c = Afc(a[0])
    if a[1] == 'counters':
        print('applied %d refused %d full %d' % c.counters()); return 0
    port, queue = int(a[2]), int(a[3])
    if a[1] == 'flood':  # flood PORT QUEUE COUNT|SECONDS.s: pause/resume pairs, never waits
        words, secs = (1 << 31 | port << 22 | queue << 15, port << 22 | queue << 15), '.' in a[4]
        n, ok, end, t0 = 0, 0, float(a[4]) if secs else int(a[4]), time.monotonic()
        while (time.monotonic() - t0 if secs else n) < end:
            for w in words * (64 if secs else 1):
                ok += c.push(w)
            n += 128 if secs else 2
        print(f'written {ok} refused {n - ok} seconds {time.monotonic() - t0:.3f}'); return 0
    done = c.pause(port, queue, int(a[4]) if len(a) > 4 else 0) if a[1] == 'pause' else c.resume(port, queue)
    print('ok' if done else 'refused: ring full'); return 0 if done else 1

if __name__ == '__main__':
    if len(sys.argv) < 3:
        sys.exit('usage: afc.py RING {pause PORT QUEUE [CREDIT] | resume PORT QUEUE | '
                 'flood PORT QUEUE COUNT|SECONDS.s | counters}')
    sys.exit(main(sys.argv[1:]))
