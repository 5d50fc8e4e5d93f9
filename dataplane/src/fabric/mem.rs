//! Frame memory of the fabric: one arena for every switch and host, so frames move between
//! switches as handles, never copied. It grows in slabs on demand up to a cap, so a fabric
//! does not reserve memory for every buffer it could fill.

use crate::frame::{FrameId, FrameMem};

const SLAB_SHIFT: u32 = 12;
const SLAB_FRAMES: usize = 1 << SLAB_SHIFT;

/// Bytes per frame chunk (the largest frame a port accepts is 1792 B).
pub const ROOM: usize = 2048;
/// Distance between two chunks' starts: a cache line more than [`ROOM`]. At a power-of-two
/// stride every frame's headers (the bytes the pipeline reads) fall in the same few cache
/// sets (a 2 KiB stride leaves 2 of an L1's 64 sets to every header), so with thousands of
/// frames queued in a large fabric each parse missed the cache; one line more spreads them
/// over every set.
const STRIDE: usize = ROOM + 64;

/// A growable arena of 2 KiB frame chunks.
#[derive(Debug)]
pub struct FabricMem {
    slabs: Vec<Box<[u8]>>,
    free: Vec<FrameId>,
    /// Chunks handed to the free list so far.
    frames: usize,
    max_frames: usize,
}

impl FabricMem {
    /// An empty arena that will hold at most `max_frames` frames at once.
    pub fn new(max_frames: usize) -> Self {
        FabricMem {
            slabs: Vec::new(),
            free: Vec::new(),
            frames: 0,
            max_frames: max_frames.min(u32::MAX as usize),
        }
    }

    /// Frames allocated so far (free or in use).
    pub fn capacity(&self) -> usize {
        self.frames
    }

    /// Frames currently in use.
    pub fn in_use(&self) -> usize {
        self.capacity() - self.free.len()
    }

    fn grow(&mut self) -> bool {
        let base = self.slabs.len() * SLAB_FRAMES;
        if base >= self.max_frames {
            return false;
        }
        let mut slab = vec![0u8; SLAB_FRAMES * STRIDE].into_boxed_slice();
        // Frames are read at random across the slab (8.6 MB): huge pages spare a TLB miss
        // per frame delivered (perf: the prefetch of a delivered frame's headers waited on
        // its page walk).
        crate::port::sys::advise_huge_pages(&mut slab);
        self.slabs.push(slab);
        let n = SLAB_FRAMES.min(self.max_frames - base);
        self.free
            .extend((base..base + n).rev().map(|i| FrameId(i as u32)));
        self.frames += n;
        true
    }

    /// Copies `bytes` into a new chunk.
    pub fn alloc_with(&mut self, bytes: &[u8]) -> Option<FrameId> {
        if bytes.len() > ROOM {
            return None;
        }
        let f = self.alloc()?;
        self.with_mut(f, |d| d[..bytes.len()].copy_from_slice(bytes));
        Some(f)
    }
}

impl FrameMem for FabricMem {
    #[inline]
    fn data(&self, f: FrameId) -> &[u8] {
        let i = f.0 as usize;
        let o = (i & (SLAB_FRAMES - 1)) * STRIDE;
        &self.slabs[i >> SLAB_SHIFT][o..o + ROOM]
    }

    #[inline]
    fn with_mut<R>(&mut self, f: FrameId, g: impl FnOnce(&mut [u8]) -> R) -> R {
        let i = f.0 as usize;
        let o = (i & (SLAB_FRAMES - 1)) * STRIDE;
        g(&mut self.slabs[i >> SLAB_SHIFT][o..o + ROOM])
    }

    #[inline]
    fn alloc(&mut self) -> Option<FrameId> {
        if let Some(f) = self.free.pop() {
            return Some(f);
        }
        if self.grow() {
            self.free.pop()
        } else {
            None
        }
    }

    #[inline]
    fn free(&mut self, f: FrameId) {
        self.free.push(f);
    }

    fn room(&self) -> usize {
        ROOM
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_cap_and_recycles() {
        let mut m = FabricMem::new(SLAB_FRAMES + 3);
        let mut got = Vec::new();
        while let Some(f) = m.alloc() {
            got.push(f);
        }
        assert_eq!(got.len(), SLAB_FRAMES + 3);
        m.with_mut(got[SLAB_FRAMES + 1], |d| d[5] = 7);
        assert_eq!(m.data(got[SLAB_FRAMES + 1])[5], 7);
        m.free(got[0]);
        assert_eq!(m.alloc(), Some(got[0]));
        assert_eq!(m.in_use(), SLAB_FRAMES + 3);
    }
}
