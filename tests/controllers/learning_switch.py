"""An os-ken learning switch for OpenFlow 1.3, in the style of os-ken's classic
simple_switch_13, used by crates/hayate/tests/controller_osken.rs.

On connect it installs a table-miss flow that sends packets to the controller. For each
packet-in it learns (datapath, source MAC) -> in_port; when the destination is known it
installs a flow (in_port, eth_src, eth_dst -> output) and sends the packet there, otherwise
it floods (os-ken from PyPI ships no simple_switch_13 app: os_ken/app holds only ofctl). Errors
the switch sends are logged as "OFP error". This file also starts os-ken itself:

    python learning_switch.py PORT [HOST [MAC=PORT ...]]

MAC=PORT arguments preload the MAC table of every switch (a benchmark that only sends from
new source MACs thus gets a flow per packet-in, as cbench does).
"""

import logging
import sys

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ether_types
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch(app_manager.OSKenApp):
    """L2 learning: table-miss to the controller, one flow per learnt (src, dst) pair."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    PRELOAD = {}  # mac -> port, from the command line

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ports = {}  # datapath id -> {mac: port}

    @staticmethod
    def add_flow(dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority, match=match,
                                      instructions=inst))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        miss = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        self.add_flow(dp, 0, parser.OFPMatch(), miss)
        self.logger.info("switch %016x connected", dp.id)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_error(self, ev):
        """Logs every error the switch sends (the test fails on "OFP error")."""
        msg = ev.msg
        self.logger.warning("OFP error type %d code %d for xid %#x: %s", msg.type, msg.code,
                            msg.xid, bytes(msg.data[:64]).hex())

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        data = msg.data
        if len(data) < 14:
            return
        # The Ethernet header is all a learning switch reads: take it from the bytes rather
        # than parse the whole packet (half of this handler's time otherwise).
        if int.from_bytes(data[12:14], "big") == ether_types.ETH_TYPE_LLDP:
            return
        dst, src = data[0:6].hex(":"), data[6:12].hex(":")
        table = self.ports.setdefault(dp.id, dict(self.PRELOAD))
        table[src] = in_port
        out_port = table.get(dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out_port)]
        if out_port != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=src, eth_dst=dst)
            self.add_flow(dp, 1, match, actions)
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER,
                                        in_port=in_port, actions=actions, data=data))


def main():
    port = sys.argv[1] if len(sys.argv) > 1 else "6653"
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    for arg in sys.argv[3:]:
        mac, _, port_no = arg.partition("=")
        LearningSwitch.PRELOAD[mac.lower()] = int(port_no)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    cfg.CONF(args=["--ofp-tcp-listen-port", port, "--ofp-listen-host", host],
             project="os_ken")
    app_manager.AppManager.run_apps([__name__])


if __name__ == "__main__":
    # Run as a script, this module is __main__; os-ken loads apps by module name.
    sys.modules.setdefault("learning_switch", sys.modules[__name__])
    main()
