"""DDS Security (SROS2) for the simulation graph: each node's endpoints read from the node
itself (``endpoints``), the governance and permissions documents derived from them
(``policy``), and ``mav-keystore``, which writes an SROS2 keystore with openssl
(``keystore``). docs/security.md describes the threat model and how to use them."""
