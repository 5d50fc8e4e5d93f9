// The `xoff sim` speed scenario in ns-3, as an ns-3 user would write it: nodes joined by
// ns-3's own PointToPoint links (data rate, delay, a DropTail device queue), switches as
// IPv4 routers with global routing and ECMP, UdpClient sources and UdpServer sinks. The
// topology, rates, delays, buffers and flows come from a spec file that bench/ns3/run.py
// writes from the xoff sim TOML, so both simulators run the same scenario.
//
// Measures what `cargo bench -p bench --bench fabric` measures for xoff: packet-hops (a frame
// received at the far end of a link, the PhyRxEnd trace of every device) per wall-clock
// second of Simulator::Run(), set-up excluded, the run ending when the network has drained.
//
// Spec lines (times ps, rates bit/s, sizes bytes):
//   node NAME switch|host
//   link A B RATE DELAY QUEUE_A QUEUE_B      (QUEUE_x: "<n>B" or "<n>p", the device queue)
//   flow SRC DST RATE FRAME_BYTES START JITTER
//   duration PS
//   seed N
//
// Usage: scenario SPEC [--scheduler ns3::MapScheduler]
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

uint64_t g_hops = 0;

void
OnPhyRxEnd(Ptr<const Packet>)
{
    ++g_hops;
}

struct LinkSpec
{
    std::string a, b;
    uint64_t rate, delay;
    std::string qa, qb;
};

struct FlowSpec
{
    std::string src, dst;
    uint64_t rate, frame, start, jitter;
};

// Preamble + SFD + inter-frame gap that xoff's shaper charges per frame (units::WIRE_OVERHEAD);
// ns-3's PointToPoint models it as the device's InterframeGap.
const uint64_t kWireOverhead = 20;
// ns-3's PointToPoint frame = 2 B PPP header + IP packet; an xoff frame of N bytes (Ethernet
// header included, FCS not) takes the same wire time as a PPP frame of N bytes.
const uint64_t kPpp = 2;
const uint64_t kIpUdp = 28;

} // namespace

int
main(int argc, char* argv[])
{
    if (argc < 2)
    {
        std::cerr << "usage: scenario SPEC [--scheduler TYPE]\n";
        return 2;
    }
    std::string scheduler = "ns3::MapScheduler";
    for (int i = 2; i + 1 < argc; i++)
    {
        if (std::string(argv[i]) == "--scheduler")
        {
            scheduler = argv[i + 1];
        }
    }
    std::ifstream in(argv[1]);
    if (!in)
    {
        std::cerr << "cannot read " << argv[1] << "\n";
        return 2;
    }
    std::vector<std::pair<std::string, bool>> nodeSpecs;
    std::vector<LinkSpec> links;
    std::vector<FlowSpec> flows;
    uint64_t duration = 0;
    uint32_t seed = 1;
    std::string line;
    while (std::getline(in, line))
    {
        std::istringstream s(line);
        std::string kind;
        if (!(s >> kind))
        {
            continue;
        }
        if (kind == "node")
        {
            std::string name, role;
            s >> name >> role;
            nodeSpecs.emplace_back(name, role == "switch");
        }
        else if (kind == "link")
        {
            LinkSpec l;
            s >> l.a >> l.b >> l.rate >> l.delay >> l.qa >> l.qb;
            links.push_back(l);
        }
        else if (kind == "flow")
        {
            FlowSpec f;
            s >> f.src >> f.dst >> f.rate >> f.frame >> f.start >> f.jitter;
            flows.push_back(f);
        }
        else if (kind == "duration")
        {
            s >> duration;
        }
        else if (kind == "seed")
        {
            s >> seed;
        }
    }

    // 100 Gbit/s needs picoseconds: a 1500 B frame takes 121.6 ns.
    Time::SetResolution(Time::PS);
    RngSeedManager::SetSeed(seed);
    GlobalValue::Bind("SchedulerType", StringValue(scheduler));
    // Switches spread a destination's equal-cost next hops: Ipv4GlobalRouting's ECMP (per
    // packet; ns-3's global routing has no per-flow hash).
    Config::SetDefault("ns3::Ipv4GlobalRouting::RandomEcmpRouting", BooleanValue(true));

    std::map<std::string, uint32_t> index;
    NodeContainer nodes;
    nodes.Create(nodeSpecs.size());
    for (uint32_t i = 0; i < nodeSpecs.size(); i++)
    {
        index[nodeSpecs[i].first] = i;
    }
    InternetStackHelper internet;
    internet.Install(nodes);

    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.252");
    TrafficControlHelper tch;
    std::map<std::string, Ipv4Address> hostAddr;
    for (const auto& l : links)
    {
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(l.rate)));
        p2p.SetDeviceAttribute("InterframeGap",
                               TimeValue(PicoSeconds(kWireOverhead * 8 * 1000000000000ULL / l.rate)));
        p2p.SetChannelAttribute("Delay", TimeValue(PicoSeconds(l.delay)));
        NetDeviceContainer d = p2p.Install(nodes.Get(index.at(l.a)), nodes.Get(index.at(l.b)));
        d.Get(0)->GetObject<PointToPointNetDevice>()->GetQueue()->SetMaxSize(QueueSize(l.qa));
        d.Get(1)->GetObject<PointToPointNetDevice>()->GetQueue()->SetMaxSize(QueueSize(l.qb));
        Ipv4InterfaceContainer ifs = addr.Assign(d);
        addr.NewNetwork();
        // The device queue is the port's buffer (a FIFO, as xoff's port queue): no queue
        // disc in front of it (Ipv4AddressHelper installs fq_codel by default).
        tch.Uninstall(d);
        for (int e = 0; e < 2; e++)
        {
            const std::string& n = e == 0 ? l.a : l.b;
            if (!nodeSpecs[index.at(n)].second)
            {
                hostAddr[n] = ifs.GetAddress(e);
            }
        }
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    const uint16_t port = 9;
    for (const auto& [name, ip] : hostAddr)
    {
        UdpServerHelper server(port);
        server.Install(nodes.Get(index.at(name)));
    }
    Ptr<UniformRandomVariable> jitter = CreateObject<UniformRandomVariable>();
    uint64_t end = 0;
    for (const auto& f : flows)
    {
        uint64_t frame = std::max<uint64_t>(f.frame, kPpp + kIpUdp + 12);
        // UdpClient writes a 12 B sequence/timestamp header into the payload it sends.
        UdpClientHelper client(hostAddr.at(f.dst), port);
        client.SetAttribute("MaxPackets", UintegerValue(0));
        client.SetAttribute("PacketSize", UintegerValue(frame - kPpp - kIpUdp));
        // One frame per wire time at the flow's rate, as xoff's constant-rate source.
        client.SetAttribute(
            "Interval",
            TimeValue(PicoSeconds(((frame + kWireOverhead) * 8 * 1000000000000ULL + f.rate - 1) /
                                  f.rate)));
        ApplicationContainer app = client.Install(nodes.Get(index.at(f.src)));
        uint64_t start = f.start + (f.jitter ? uint64_t(jitter->GetValue(0, double(f.jitter))) : 0);
        app.Start(PicoSeconds(start));
        app.Stop(PicoSeconds(duration));
        end = std::max(end, duration);
    }
    Config::ConnectWithoutContext("/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/PhyRxEnd",
                                  MakeCallback(&OnPhyRxEnd));

    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t now = Simulator::Now().GetPicoSeconds();
    uint64_t events = Simulator::GetEventCount();
    Simulator::Destroy();
    std::printf("ns-3 %s: %.0f us virtual, %llu packet-hops, %llu events in %.3f s wall = %.4f M "
                "packet-hops/s\n",
                scheduler.c_str(),
                now / 1e6,
                (unsigned long long)g_hops,
                (unsigned long long)events,
                secs,
                g_hops / secs / 1e6);
    (void)end;
    return 0;
}
