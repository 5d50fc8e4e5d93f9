-- Wireshark/tshark dissector for Xoff's own frames (see flowctl/src/wire/signal.rs and
-- flowctl/src/wire/shim.rs):
--   EtherType 0x88B5  Xoff signal: version, type (1 PAUSE, 2 RESUME, 3 BITMAP,
--                     0x10 FLOW PAUSE, 0x11 FLOW RESUME: Aquarius), fields
--                     (0x20-0x2F: Pyrrha PAUSE/RESUME/MERGE, see the Pyrrha block below)
--   EtherType 0x88B6  Xoff data shim: version|flags, upstreamQ, then the original EtherType
-- Use: tshark -X lua_script:deploy/wireshark/xoff.lua -r capture.pcap -V
--      (or copy to ~/.local/lib/wireshark/plugins/)

local sig = Proto("xoffsig", "Xoff signal")
local f_ver = ProtoField.uint8("xoffsig.version", "Version")
local types = { [1] = "PAUSE", [2] = "RESUME", [3] = "BITMAP" }
-- Aquarius (type codes 0x10-0x1F): queue + FID.
types[0x10] = "FLOW PAUSE"
types[0x11] = "FLOW RESUME"
local f_type = ProtoField.uint8("xoffsig.type", "Type", base.DEC, types)
local f_queue = ProtoField.uint16("xoffsig.queue", "Queue")
local f_count = ProtoField.uint16("xoffsig.count", "Queues covered")
local f_bitmap = ProtoField.bytes("xoffsig.bitmap", "Pause bitmap (bit q = queue q, LSB first)")
local f_paused = ProtoField.string("xoffsig.paused", "Paused queues")
-- Aquarius: the FID of a FLOW PAUSE/RESUME.
local f_fid = ProtoField.uint32("xoffsig.fid", "FID hash", base.HEX)
sig.fields = { f_ver, f_type, f_queue, f_count, f_bitmap, f_paused, f_fid }

function sig.dissector(buf, pinfo, tree)
    if buf:len() < 2 then return end
    pinfo.cols.protocol = "XOFF-SIG"
    local t = tree:add(sig, buf())
    t:add(f_ver, buf(0, 1))
    local ty = buf(1, 1):uint()
    t:add(f_type, buf(1, 1))
    if (ty == 1 or ty == 2) and buf:len() >= 4 then
        t:add(f_queue, buf(2, 2))
        pinfo.cols.info = string.format("%s queue %d", types[ty], buf(2, 2):uint())
    elseif ty == 3 and buf:len() >= 20 then
        t:add(f_count, buf(2, 2))
        t:add(f_bitmap, buf(4, 16))
        local qs = {}
        for i = 0, 15 do
            local b = buf(4 + i, 1):uint()
            for j = 0, 7 do
                if bit.band(b, bit.lshift(1, j)) ~= 0 then qs[#qs + 1] = tostring(i * 8 + j) end
            end
        end
        local s = table.concat(qs, ",")
        t:add(f_paused, s)
        pinfo.cols.info = "BITMAP paused {" .. s .. "}"
    elseif (ty == 0x10 or ty == 0x11) and buf:len() >= 10 then
        -- Aquarius PAUSE/RESUME(queue, FID)
        t:add(f_queue, buf(2, 2))
        t:add(f_fid, buf(6, 4))
        pinfo.cols.info = string.format("%s queue %d fid 0x%08x", types[ty], buf(2, 2):uint(),
            buf(6, 4):uint())
    end
end

local shim = Proto("xoffshim", "Xoff data shim")
local s_ver = ProtoField.uint8("xoffshim.version", "Version", base.DEC, nil, 0xF0)
local s_flags = ProtoField.uint8("xoffshim.flags", "Flags", base.HEX, nil, 0x0F)
local s_upq = ProtoField.uint8("xoffshim.upstream_q", "upstreamQ")
local s_type = ProtoField.uint16("xoffshim.type", "Type", base.HEX)
shim.fields = { s_ver, s_flags, s_upq, s_type }

function shim.dissector(buf, pinfo, tree)
    if buf:len() < 4 then return end
    local t = tree:add(shim, buf(0, 4))
    t:add(s_ver, buf(0, 1))
    t:add(s_flags, buf(0, 1))
    t:add(s_upq, buf(1, 1))
    t:add(s_type, buf(2, 2))
    local et = DissectorTable.get("ethertype")
    local d = et:get_dissector(buf(2, 2):uint())
    if d then d:call(buf(4):tvb(), pinfo, tree) end
end

local et = DissectorTable.get("ethertype")
et:add(0x88B5, sig)
et:add(0x88B6, shim)

-- --- Pyrrha (issue 17): signal types 0x20-0x2F (flowctl/src/pyrrha/wire.rs) ---
--   0x20 PAUSE / 0x21 RESUME: root switch-id (u16), root port-id (u16), hops (u8), reserved
--   0x22 MERGE: old root switch, port (u16 each), old hops, new hops (u8), new root switch, port
local py_types = { [0x20] = "PYRRHA PAUSE", [0x21] = "PYRRHA RESUME", [0x22] = "PYRRHA MERGE" }
local pyr = Proto("xoffpyrrha", "Xoff Pyrrha signal")
local py_ver = ProtoField.uint8("xoffpyrrha.version", "Version")
local py_type = ProtoField.uint8("xoffpyrrha.type", "Type", base.HEX, py_types)
local py_root = ProtoField.string("xoffpyrrha.root", "Root (switch:port)")
local py_hops = ProtoField.uint8("xoffpyrrha.hops", "Root hops")
local py_new = ProtoField.string("xoffpyrrha.new_root", "New root (switch:port)")
local py_new_hops = ProtoField.uint8("xoffpyrrha.new_hops", "New root hops")
pyr.fields = { py_ver, py_type, py_root, py_hops, py_new, py_new_hops }

-- 0x88B5 now comes here first; other signal types go on to the Xoff signal dissector.
local xoffsig_handle = Dissector.get("xoffsig")
function pyr.dissector(buf, pinfo, tree)
    if buf:len() < 2 or buf(1, 1):uint() < 0x20 or buf(1, 1):uint() > 0x2F then
        return xoffsig_handle:call(buf, pinfo, tree)
    end
    pinfo.cols.protocol = "XOFF-PYRRHA"
    local t = tree:add(pyr, buf())
    local ty = buf(1, 1):uint()
    t:add(py_ver, buf(0, 1))
    t:add(py_type, buf(1, 1))
    if buf:len() < 7 then return end
    local root = string.format("%d:%d", buf(2, 2):uint(), buf(4, 2):uint())
    t:add(py_root, buf(2, 4), root)
    t:add(py_hops, buf(6, 1))
    local info = string.format("%s root %s hops %d", py_types[ty] or "PYRRHA", root, buf(6, 1):uint())
    if ty == 0x22 and buf:len() >= 12 then
        local new = string.format("%d:%d", buf(8, 2):uint(), buf(10, 2):uint())
        t:add(py_new_hops, buf(7, 1))
        t:add(py_new, buf(8, 4), new)
        info = string.format("PYRRHA MERGE %s (hops %d) -> %s (hops %d)", root, buf(6, 1):uint(), new, buf(7, 1):uint())
    end
    pinfo.cols.info = info
end

DissectorTable.get("ethertype"):add(0x88B5, pyr)
-- --- end Pyrrha ---
