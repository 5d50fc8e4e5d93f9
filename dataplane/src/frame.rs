//! Frame handles and the memory they point into.
//!
//! A switch never copies a frame to forward it: packets wait in queues as [`FrameId`]s, indices
//! of fixed-size chunks in one memory region (the AF_XDP UMEM shared by all ports, or a heap
//! arena in the virtual-time fabric). Whoever holds a `FrameId` owns the chunk.

/// Index of a buffer chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// Memory that frames live in, plus the owner's free list.
pub trait FrameMem {
    /// The whole data room of a chunk (frame bytes start at offset 0).
    fn data(&self, f: FrameId) -> &[u8];
    /// Runs `g` on the mutable data room of a chunk. (A closure rather than a returned slice:
    /// AF_XDP's UMEM accessors lend mutable frame memory only for a scope.)
    fn with_mut<R>(&mut self, f: FrameId, g: impl FnOnce(&mut [u8]) -> R) -> R;
    /// Takes a free chunk.
    fn alloc(&mut self) -> Option<FrameId>;
    /// Returns a chunk to the free list.
    fn free(&mut self, f: FrameId);
    /// Bytes a chunk can hold.
    fn room(&self) -> usize;

    /// Copies the first `len` bytes of `src` into `dst`.
    fn copy_frame(&mut self, src: FrameId, dst: FrameId, len: usize) {
        let tmp = self.data(src)[..len].to_vec();
        self.with_mut(dst, |d| d[..len].copy_from_slice(&tmp));
    }
}

/// A frame arena on the heap, for the virtual-time fabric and tests.
#[derive(Debug)]
pub struct HeapMem {
    buf: Vec<u8>,
    room: usize,
    free: Vec<FrameId>,
}

impl HeapMem {
    pub fn new(frames: usize, room: usize) -> Self {
        HeapMem {
            buf: vec![0; frames * room],
            room,
            free: (0..frames as u32).rev().map(FrameId).collect(),
        }
    }

    /// Free chunks left.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Copies `bytes` into a new chunk.
    pub fn alloc_with(&mut self, bytes: &[u8]) -> Option<FrameId> {
        if bytes.len() > self.room {
            return None;
        }
        let f = self.alloc()?;
        self.with_mut(f, |d| d[..bytes.len()].copy_from_slice(bytes));
        Some(f)
    }
}

impl FrameMem for HeapMem {
    fn data(&self, f: FrameId) -> &[u8] {
        let o = f.0 as usize * self.room;
        &self.buf[o..o + self.room]
    }

    #[inline]
    fn with_mut<R>(&mut self, f: FrameId, g: impl FnOnce(&mut [u8]) -> R) -> R {
        let o = f.0 as usize * self.room;
        g(&mut self.buf[o..o + self.room])
    }

    fn alloc(&mut self) -> Option<FrameId> {
        self.free.pop()
    }

    fn free(&mut self, f: FrameId) {
        self.free.push(f);
    }

    fn room(&self) -> usize {
        self.room
    }
}

/// A packet waiting in the switch: its frame and what the pipeline decided about it.
#[derive(Debug, Clone, Copy)]
pub struct Pkt {
    pub frame: FrameId,
    pub len: u32,
    pub in_port: u16,
    /// Priority (0..=7) after classification.
    pub prio: u8,
    /// Egress queue.
    pub queue: u8,
    /// Arrival time at the switch (ps).
    pub arrival: u64,
    /// Buffer accounting of this packet, returned when it leaves.
    pub tag: crate::buffer::BufTag,
    /// EtherType of the L3 header (for ECN marking), 0 if none.
    pub l3_type: u16,
    /// Offset of the L3 header.
    pub l3_off: u8,
    /// ECN-capable transport.
    pub ect: bool,
    /// What the switch's flow-control scheme keeps with the packet (opaque here).
    pub scheme: crate::scheme::PktMeta,
}

impl Pkt {
    /// A packet of `len` bytes in `frame` with nothing decided yet.
    pub fn new(frame: FrameId, len: u32, in_port: u16, arrival: u64) -> Self {
        Pkt {
            frame,
            len,
            in_port,
            prio: 0,
            queue: 0,
            arrival,
            tag: crate::buffer::BufTag::None,
            l3_type: 0,
            l3_off: 0,
            ect: false,
            scheme: crate::scheme::PktMeta::default(),
        }
    }
}
