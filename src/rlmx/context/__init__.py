"""The context: loaders and the metadata the root model sees instead of the content."""
