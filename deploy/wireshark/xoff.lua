-- Wireshark/tshark dissector for Xoff's own frames (see flowctl/src/wire/signal.rs and
-- flowctl/src/wire/shim.rs):
--   EtherType 0x88B5  Xoff signal: version, type (1 PAUSE, 2 RESUME, 3 BITMAP,
--                     0x10 FLOW PAUSE, 0x11 FLOW RESUME: Aquarius), fields
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
