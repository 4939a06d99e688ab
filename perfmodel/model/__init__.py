"""A model's config read into its byte terms, and the built-in model presets."""
