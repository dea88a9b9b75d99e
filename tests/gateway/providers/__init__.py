"""The provider adapters: translations to and from each upstream, and what an upstream may send."""
