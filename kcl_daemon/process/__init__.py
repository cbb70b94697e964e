"""Record-processor children: spawning and stopping them, and talking the protocol with them."""
