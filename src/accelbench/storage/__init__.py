"""The results database and the files results travel in: storing and querying, the schema and its
migrations, finding and opening a database, and the export and import formats."""
