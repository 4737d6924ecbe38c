"""Background responses: the steps whose end a later exchange brings, held here and in the store."""
