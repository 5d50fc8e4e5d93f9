-- Wireshark/tshark dissector for Xoff's own frames. Every layout here mirrors a Rust codec,
-- and tools/tests/dissector.rs checks every field below against those codecs (frames they
-- emit, and frames captured from running switches with `xoff ctl tap`).
--
--   EtherType 0x88B5  Xoff signal (flowctl/src/wire/signal.rs): version (1), type, fields
--       0x01 PAUSE / 0x02 RESUME   queue u16, reserved u16                  (BFC §3.3)
--       0x03 BITMAP                count u16, 16-byte bitmap, bit q = queue q, LSB first
--       0x10 FLOW PAUSE / 0x11 FLOW RESUME  queue u16, reserved u16, FID u32   (Aquarius)
--       0x20 PAUSE / 0x21 RESUME   root switch u16, root port u16, hops u8, reserved
--       0x22 MERGE                 old root switch, port (u16), old hops, new hops (u8),
--                                  new root switch, port (u16)   (Pyrrha, flowctl/src/pyrrha/wire.rs)
--       0x30 FEEDBACK              edge u16, n u8, reserved u8, n x (path u16, t_pd ns u32,
--                                  utilisation per mille u16, arrival frontier: send time ns
--                                  of the path's latest arrival u32)
--                                  (Proteus, flowctl/src/wire/proteus.rs)
--   EtherType 0x88B6  Xoff data shim: byte 0 = version (high nibble) | flags (low nibble)
--       version 1 (flowctl/src/wire/shim.rs): upstreamQ u8, then the original EtherType
--       version 2 (Proteus): reserved u8, path + 3 alternatives (4 x 12 bits, 0xFFF none),
--                 tolerable delay t_td ns (u24), send time ns (u24, low bits), EtherType
--       version 3 (CONGA, flowctl/src/wire/conga.rs; flags bit 0 = FB valid): LBTag (4 bits)
--                 | CE (low 3 bits), FB_LBTag (4 bits) | FB_Metric (low 3 bits), reserved u8,
--                 source leaf u16, EtherType
--   802.1Qbb PFC and 802.3x PAUSE (EtherType 0x8808) are Wireshark's own `macc` dissector.
-- All fields big endian. Use: tshark -X lua_script:deploy/wireshark/xoff.lua -r capture.pcap -V
--      (or copy to ~/.local/lib/wireshark/plugins/)

local et_table = DissectorTable.get("ethertype")

-- ---------------------------------------------------------------- signal frames (0x88B5)
local sig = Proto("xoffsig", "Xoff signal")
local types = {
    [0x01] = "PAUSE", [0x02] = "RESUME", [0x03] = "BITMAP",
    [0x10] = "FLOW PAUSE", [0x11] = "FLOW RESUME",
    [0x20] = "PYRRHA PAUSE", [0x21] = "PYRRHA RESUME", [0x22] = "PYRRHA MERGE",
    [0x30] = "PROTEUS FEEDBACK",
}
local f_ver = ProtoField.uint8("xoffsig.version", "Version")
local f_type = ProtoField.uint8("xoffsig.type", "Type", base.HEX, types)
local f_queue = ProtoField.uint16("xoffsig.queue", "Queue")
local f_reserved = ProtoField.uint16("xoffsig.reserved", "Reserved")
local f_count = ProtoField.uint16("xoffsig.count", "Queues covered")
local f_bitmap = ProtoField.bytes("xoffsig.bitmap", "Pause bitmap (bit q = queue q, LSB first)")
local f_paused = ProtoField.string("xoffsig.paused", "Paused queues")
local f_fid = ProtoField.uint32("xoffsig.fid", "FID hash", base.HEX)
sig.fields = { f_ver, f_type, f_queue, f_reserved, f_count, f_bitmap, f_paused, f_fid }
local e_short = ProtoExpert.new("xoffsig.short", "Frame too short for its type", expert.group.MALFORMED, expert.severity.ERROR)
local e_version = ProtoExpert.new("xoffsig.bad_version", "Unknown version (receivers drop it)", expert.group.MALFORMED, expert.severity.WARN)
local e_type = ProtoExpert.new("xoffsig.unknown_type", "Unknown signal type (receivers drop it)", expert.group.UNDECODED, expert.severity.WARN)
sig.experts = { e_short, e_version, e_type }

-- Pyrrha (§4.4) and Proteus feedback are protocols of their own so they filter by name.
local pyr = Proto("xoffpyrrha", "Xoff Pyrrha signal")
local py_root_sw = ProtoField.uint16("xoffpyrrha.root_switch", "Root switch-id")
local py_root_port = ProtoField.uint16("xoffpyrrha.root_port", "Root port-id")
local py_root = ProtoField.string("xoffpyrrha.root", "Root (switch:port)")
local py_hops = ProtoField.uint8("xoffpyrrha.hops", "Root hops")
local py_reserved = ProtoField.uint8("xoffpyrrha.reserved", "Reserved")
local py_new_hops = ProtoField.uint8("xoffpyrrha.new_hops", "New root hops")
local py_new_sw = ProtoField.uint16("xoffpyrrha.new_root_switch", "New root switch-id")
local py_new_port = ProtoField.uint16("xoffpyrrha.new_root_port", "New root port-id")
local py_new = ProtoField.string("xoffpyrrha.new_root", "New root (switch:port)")
pyr.fields = { py_root_sw, py_root_port, py_root, py_hops, py_reserved, py_new_hops, py_new_sw,
    py_new_port, py_new }

local pro = Proto("xoffproteus", "Xoff Proteus feedback")
local pr_edge = ProtoField.uint16("xoffproteus.edge", "Source edge")
local pr_n = ProtoField.uint8("xoffproteus.entries", "Entries")
local pr_reserved = ProtoField.uint8("xoffproteus.reserved", "Reserved")
local pr_path = ProtoField.uint16("xoffproteus.path", "Path")
local pr_tpd = ProtoField.uint32("xoffproteus.t_pd_ns", "One-way delay (ns)")
local pr_u = ProtoField.uint16("xoffproteus.u_permille", "Utilisation (per mille)")
local pr_arr = ProtoField.uint32("xoffproteus.arrived_ns", "Arrived up to send time (ns)")
pro.fields = { pr_edge, pr_n, pr_reserved, pr_path, pr_tpd, pr_u, pr_arr }

local function short(t, pinfo, what)
    t:add_proto_expert_info(e_short)
    pinfo.cols.info = what .. " (truncated)"
end

local function pyrrha(buf, pinfo, tree, ty)
    pinfo.cols.protocol = "XOFF-PYRRHA"
    local t = tree:add(pyr, buf())
    local name = types[ty] or string.format("PYRRHA 0x%02x", ty)
    if buf:len() < 8 then return short(t, pinfo, name) end
    local root = string.format("%d:%d", buf(2, 2):uint(), buf(4, 2):uint())
    t:add(py_root_sw, buf(2, 2))
    t:add(py_root_port, buf(4, 2))
    t:add(py_root, buf(2, 4), root)
    t:add(py_hops, buf(6, 1))
    if ty == 0x22 then
        if buf:len() < 12 then return short(t, pinfo, name) end
        local new = string.format("%d:%d", buf(8, 2):uint(), buf(10, 2):uint())
        t:add(py_new_hops, buf(7, 1))
        t:add(py_new_sw, buf(8, 2))
        t:add(py_new_port, buf(10, 2))
        t:add(py_new, buf(8, 4), new)
        pinfo.cols.info = string.format("PYRRHA MERGE %s (hops %d) -> %s (hops %d)", root,
            buf(6, 1):uint(), new, buf(7, 1):uint())
    else
        t:add(py_reserved, buf(7, 1))
        pinfo.cols.info = string.format("%s root %s hops %d", name, root, buf(6, 1):uint())
    end
end

local function proteus(buf, pinfo, tree)
    pinfo.cols.protocol = "XOFF-PROTEUS"
    local t = tree:add(pro, buf())
    if buf:len() < 6 then return short(t, pinfo, "PROTEUS FEEDBACK") end
    local n = buf(4, 1):uint()
    t:add(pr_edge, buf(2, 2))
    t:add(pr_n, buf(4, 1))
    t:add(pr_reserved, buf(5, 1))
    if buf:len() < 6 + 12 * n then return short(t, pinfo, "PROTEUS FEEDBACK") end
    for i = 0, n - 1 do
        local o = 6 + 12 * i
        local e = t:add(buf(o, 12), string.format("Path %d: %d ns, %d per mille, arrived to %d ns",
            buf(o, 2):uint(), buf(o + 2, 4):uint(), buf(o + 6, 2):uint(), buf(o + 8, 4):uint()))
        e:add(pr_path, buf(o, 2))
        e:add(pr_tpd, buf(o + 2, 4))
        e:add(pr_u, buf(o + 6, 2))
        e:add(pr_arr, buf(o + 8, 4))
    end
    pinfo.cols.info = string.format("PROTEUS FEEDBACK edge %d, %d paths", buf(2, 2):uint(), n)
end

function sig.dissector(buf, pinfo, tree)
    if buf:len() < 2 then return end
    pinfo.cols.protocol = "XOFF-SIG"
    local t = tree:add(sig, buf())
    t:add(f_ver, buf(0, 1))
    local ty = buf(1, 1):uint()
    t:add(f_type, buf(1, 1))
    if buf(0, 1):uint() ~= 1 then
        t:add_proto_expert_info(e_version)
        pinfo.cols.info = string.format("version %d (unknown)", buf(0, 1):uint())
        return
    end
    if ty >= 0x20 and ty <= 0x2F then return pyrrha(buf, pinfo, tree, ty) end
    if ty == 0x30 then return proteus(buf, pinfo, tree) end
    if ty == 1 or ty == 2 then
        if buf:len() < 6 then return short(t, pinfo, types[ty]) end
        t:add(f_queue, buf(2, 2))
        t:add(f_reserved, buf(4, 2))
        pinfo.cols.info = string.format("%s queue %d", types[ty], buf(2, 2):uint())
    elseif ty == 3 then
        if buf:len() < 20 then return short(t, pinfo, "BITMAP") end
        local count = buf(2, 2):uint()
        t:add(f_count, buf(2, 2))
        t:add(f_bitmap, buf(4, 16))
        -- Only queues below `count` are covered (the receiver masks the rest).
        local qs = {}
        for q = 0, math.min(count, 128) - 1 do
            local b = buf(4 + math.floor(q / 8), 1):uint()
            if bit.band(b, bit.lshift(1, q % 8)) ~= 0 then qs[#qs + 1] = tostring(q) end
        end
        local s = (#qs > 0) and table.concat(qs, ",") or "none"
        t:add(f_paused, buf(4, 16), s)
        pinfo.cols.info = string.format("BITMAP of %d queues, paused {%s}", count, s)
    elseif ty == 0x10 or ty == 0x11 then
        if buf:len() < 10 then return short(t, pinfo, types[ty]) end
        t:add(f_queue, buf(2, 2))
        t:add(f_reserved, buf(4, 2))
        t:add(f_fid, buf(6, 4))
        pinfo.cols.info = string.format("%s queue %d fid 0x%08x", types[ty], buf(2, 2):uint(),
            buf(6, 4):uint())
    else
        t:add_proto_expert_info(e_type)
        pinfo.cols.info = string.format("type 0x%02x (unknown)", ty)
    end
end

-- ---------------------------------------------------------------- data shim (0x88B6)
local shim = Proto("xoffshim", "Xoff data shim")
local s_ver = ProtoField.uint8("xoffshim.version", "Version", base.DEC, nil, 0xF0)
local s_flags = ProtoField.uint8("xoffshim.flags", "Flags", base.HEX, nil, 0x0F)
local s_upq = ProtoField.uint8("xoffshim.upstream_q", "upstreamQ")
local s_reserved = ProtoField.uint8("xoffshim.reserved", "Reserved")
local s_path = ProtoField.uint16("xoffshim.path", "Selected path")
local s_alt = ProtoField.uint16("xoffshim.alt", "Alternative path (4095: none)")
local s_ttd = ProtoField.uint32("xoffshim.t_td_ns", "Tolerable delay t_td (ns)")
local s_sent = ProtoField.uint32("xoffshim.sent_ns", "Send time (ns, low 24 bits)")
local s_type = ProtoField.uint16("xoffshim.type", "Type", base.HEX)
-- Version 3 (CONGA).
local s_lbtag = ProtoField.uint8("xoffshim.lbtag", "LBTag (source leaf's uplink)", base.DEC, nil, 0xF0)
local s_ce = ProtoField.uint8("xoffshim.ce", "CE (path congestion, 3 bits)", base.DEC, nil, 0x07)
local s_fb_lbtag = ProtoField.uint8("xoffshim.fb_lbtag", "FB_LBTag", base.DEC, nil, 0xF0)
local s_fb_metric = ProtoField.uint8("xoffshim.fb_metric", "FB_Metric", base.DEC, nil, 0x07)
local s_src_leaf = ProtoField.uint16("xoffshim.src_leaf", "Source leaf")
shim.fields = { s_ver, s_flags, s_upq, s_reserved, s_path, s_alt, s_ttd, s_sent, s_type,
                s_lbtag, s_ce, s_fb_lbtag, s_fb_metric, s_src_leaf }
local e_shim = ProtoExpert.new("xoffshim.bad_version", "Unknown shim version", expert.group.MALFORMED, expert.severity.WARN)
shim.experts = { e_shim }

-- The four 12-bit path ids packed in 6 bytes, as (offset of the tvb range, id).
local function path_ids(r)
    local b = {}
    for i = 0, 5 do b[i] = r(i, 1):uint() end
    return {
        bit.bor(bit.lshift(b[0], 4), bit.rshift(b[1], 4)),
        bit.bor(bit.lshift(bit.band(b[1], 0x0F), 8), b[2]),
        bit.bor(bit.lshift(b[3], 4), bit.rshift(b[4], 4)),
        bit.bor(bit.lshift(bit.band(b[4], 0x0F), 8), b[5]),
    }
end

function shim.dissector(buf, pinfo, tree)
    if buf:len() < 4 then return end
    local ver = bit.rshift(buf(0, 1):uint(), 4)
    local len = (ver == 2) and 16 or ((ver == 3) and 8 or 4)
    if buf:len() < len then return end
    local t = tree:add(shim, buf(0, len))
    t:add(s_ver, buf(0, 1))
    t:add(s_flags, buf(0, 1))
    local inner
    if ver == 1 then
        t:add(s_upq, buf(1, 1))
        inner = buf(2, 2)
        t:append_text(string.format(", upstreamQ %d", buf(1, 1):uint()))
    elseif ver == 2 then
        t:add(s_reserved, buf(1, 1))
        local ids = path_ids(buf(2, 6))
        -- Each id spans a byte and a half: its two bytes are highlighted.
        t:add(s_path, buf(2, 2), ids[1])
        t:add(s_alt, buf(3, 2), ids[2])
        t:add(s_alt, buf(5, 2), ids[3])
        t:add(s_alt, buf(6, 2), ids[4])
        t:add(s_ttd, buf(8, 3))
        t:add(s_sent, buf(11, 3))
        inner = buf(14, 2)
        t:append_text(string.format(", path %d, t_td %d ns", ids[1], buf(8, 3):uint()))
    elseif ver == 3 then
        t:add(s_lbtag, buf(1, 1))
        t:add(s_ce, buf(1, 1))
        if bit.band(buf(0, 1):uint(), 1) == 1 then
            t:add(s_fb_lbtag, buf(2, 1))
            t:add(s_fb_metric, buf(2, 1))
        end
        t:add(s_reserved, buf(3, 1))
        t:add(s_src_leaf, buf(4, 2))
        inner = buf(6, 2)
        t:append_text(string.format(", LBTag %d, CE %d", bit.rshift(buf(1, 1):uint(), 4),
            bit.band(buf(1, 1):uint(), 7)))
    else
        t:add_proto_expert_info(e_shim)
        return
    end
    t:add(s_type, inner)
    local d = et_table:get_dissector(inner:uint())
    if d then d:call(buf(len):tvb(), pinfo, tree) end
end

et_table:add(0x88B5, sig)
et_table:add(0x88B6, shim)
