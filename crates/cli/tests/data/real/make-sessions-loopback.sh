#!/usr/bin/env bash
# Makes sessions-loopback.pcap: TLS and HTTP/1.1 connections through the loopback of a
# network namespace of its own whose MTU is 400 bytes, so a ClientHello and a long request
# are split over TCP segments. Run as root. Needs openssl, curl, python3, tcpdump.
set -euo pipefail
out=${1:-sessions-loopback.pcap}
ns=corecap-sessions-$$
work=$(mktemp -d)
cleanup() { ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo mtu 400 up
# No segmentation offload: the capture sees the segments TCP sends, each within the MTU.
ip netns exec "$ns" ethtool -K lo tso off gso off >/dev/null
in_ns() { ip netns exec "$ns" "$@"; }
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
  -days 1 -subj "/CN=sessions.example" 2>/dev/null
in_ns tcpdump -i lo -s 0 -U -w "$work/cap.pcap" 'tcp port 4433 or tcp port 8080' 2>/dev/null &
sleep 1
in_ns openssl s_server -accept 4433 -cert "$work/cert.pem" -key "$work/key.pem" -alpn h2,http/1.1 -quiet -naccept 2 >/dev/null 2>&1 &
(cd "$work" && in_ns python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1) &
sleep 1
# 1: SNI and ALPN, the hello in one segment (no padding).
echo | in_ns openssl s_client -connect 127.0.0.1:4433 -servername www.example.org \
  -alpn h2,http/1.1 -no_ticket >/dev/null 2>&1 || true
# 2: a long server name and many ALPN protocols: the hello is split over segments.
long=$(printf 'a%.0s' $(seq 1 60)).$(printf 'b%.0s' $(seq 1 60)).$(printf 'c%.0s' $(seq 1 60)).example.net
echo | in_ns openssl s_client -connect 127.0.0.1:4433 -servername "$long" \
  -alpn h2,http/1.1,spdy/3.1,http/1.0,acme-tls/1,imap,pop3,managesieve,coap,xmpp-client \
  -no_ticket >/dev/null 2>&1 || true
# 3: a request in one segment; 4: a long path, so Host is in a later segment.
in_ns curl -s -o /dev/null http://127.0.0.1:8080/index.html -H 'Host: web.example.com' || true
path=/$(printf 'p%.0s' $(seq 1 500))
in_ns curl -s -o /dev/null "http://127.0.0.1:8080$path?x=1" -H 'Host: split.example.com' || true
sleep 1
kill %1 2>/dev/null || true
wait %1 2>/dev/null || true
cp "$work/cap.pcap" "$out"
